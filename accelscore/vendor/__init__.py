"""Generated modules of outside wire contracts (kubelet PodResources, libtpu metrics); imported only by adapters."""
