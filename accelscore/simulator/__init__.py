"""Fleet simulator: scores recorded fleets, emulates OCM's prioritizer, replays job traces."""
