"""Kueue ClusterQueue headroom: the pure headroom rule and the view of the queues that the watches feed."""
