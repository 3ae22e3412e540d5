"""Protocol-faithful doubles at library and wire boundaries (never of accelscore code)."""
