"""Generated modules of the libtpu runtime metrics service (loopback gRPC); used by the tpu_runtime collector."""
