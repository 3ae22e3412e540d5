"""The cluster scorer: ingest (gRPC), node table, the pure scoring core, the publish policy and publisher."""
