"""accelscore: GPU/TPU-aware placement scores for Open Cluster Management.

Layers, top to bottom (checked by `.importlinter`): `cli`; `local`, `simulator`; `agent`, `scorer`;
shared leaves `kube` (the only door to Kubernetes), `options`, `httpserve`, `logs`, `devices`; generated
`v1`, `vendor`.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
