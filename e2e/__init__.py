"""`make e2e`: accelscore on real Kubernetes, a real OCM hub and one real node, all on loopback.

Not part of the shipped package: the harness that brings the rig up (`e2e.rig`), the checks of issue 27
(`e2e.checks`) and the kustomize overlays the rig needs (`e2e/overlays`). Run it as `python -m e2e` (e2e/README.md).
"""
