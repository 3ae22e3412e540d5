"""The kubelet PodResources API (generated); imported only by the kubelet collector."""
