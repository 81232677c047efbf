"""Memory benchmarks: alias learning (``alias_bench``) and write latency (``write_latency``)."""
