"""The node agent: collectors, the NodeReport builder, /metrics and the push client."""
