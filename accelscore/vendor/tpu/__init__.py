"""Generated modules of the libtpu runtime metrics service (loopback gRPC); imported only by the tpu_runtime collector."""
