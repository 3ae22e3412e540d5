"""The cluster scorer: ingest, node table, pure scoring, hub publisher, and local mode."""
