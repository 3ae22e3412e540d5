"""accelscore: GPU/TPU-aware placement scores for Open Cluster Management (shared code: CLI, protos, options)."""

__version__ = "0.1.0"
__all__ = ["__version__"]
