"""The fault matrix's rows that no other suite covers (docs/testing.md, "Fault matrix")."""
