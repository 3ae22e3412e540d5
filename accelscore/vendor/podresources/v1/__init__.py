"""Generated modules of kubelet PodResources v1 (unix-socket gRPC)."""
