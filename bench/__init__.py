"""Benchmarks: `make bench` runs every `bench_*.py` and prints one table."""
