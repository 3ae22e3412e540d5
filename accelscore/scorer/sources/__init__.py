"""The scorer's inputs besides reports, one module each (Nodes, pending and bound pods, Kueue, custom scores)."""
