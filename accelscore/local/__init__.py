"""Local mode: this host's collectors feed the scoring core in one process; scores are printed, not published."""
