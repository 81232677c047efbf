"""Benchmarks of retrievalagent: retrieval quality, latency, ingestion, cold start, memory.

Each benchmark is one command and writes one JSON file to ``bench/results/``::

    python -m bench.quality              # fusion quality on every evaluation set
    python -m bench.latency              # retrieval and graph latency, peak RSS (1k/10k/100k)
    python -m bench.ingest               # ingestion speed against the raw embedder
    python -m bench.coldstart            # init_agent + first answer on a 100k index
    python -m bench.langchain_compare    # LangChain EnsembleRetriever on the same sets
    python -m bench.report               # docs/benchmarks.md from the JSON results

``python -m bench`` runs them all in that order.
"""
