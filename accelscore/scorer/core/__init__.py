"""The pure scoring core: node summaries, the census, one pass to cluster totals, the score table and mappings."""
