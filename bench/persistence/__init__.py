"""Persistence benchmarks (see bench_checkpointers.py)."""
