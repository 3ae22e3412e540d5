"""Generated gRPC/protobuf modules of the agent→scorer wire contract (proto/accelscore/v1); adapters only."""
