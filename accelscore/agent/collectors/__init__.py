"""One module per source (nvidia, tpu, kubelet, node, host); each fails alone (see `base`)."""
