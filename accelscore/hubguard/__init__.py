"""The hub guard (optional, runs on the hub): rewrites accelscore's score objects that passed their `validUntil`
without a refresh to their stale form, so Placements notice a dead scorer in seconds, not at the placement
controller's 10-minute resync. Composed over `accelscore.kube` and the scorer's stale form (publish_policy)."""
