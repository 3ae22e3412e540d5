"""The cluster scorer, one package per job: ingest, core (pure scoring), publish, ha, tls, custom, kueue."""
