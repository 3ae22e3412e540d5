"""Kueue ClusterQueue headroom: the pure headroom rule and the source that feeds it from the watches."""
