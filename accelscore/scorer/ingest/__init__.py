"""Report ingest: gRPC server, TokenReview auth, admission caps, validation, plausibility, summaries, node table."""
