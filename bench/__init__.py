"""Benchmarks: a data generator and the harness that measures the registry."""
