"""TLS for ingest: the pure CA/serving certificate issuer, grpc's dynamic credentials, and which source to use."""
