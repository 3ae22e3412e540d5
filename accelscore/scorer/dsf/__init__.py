"""The Dynamic Scoring Framework's scorer API (REFERENCE §12), answered from the scores this scorer publishes:
`wire` (pure: the config document, the scoring request and answer), `server` (a small bounded HTTP server),
`options` (its flags). Off unless `--dsf-address` is set (docs/dsf.md)."""
