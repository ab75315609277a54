"""Benchmarks: each module has `run(args)` and prints its figures."""
