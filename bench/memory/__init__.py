"""Memory benchmarks: alias learning (``alias_bench``), write and recall latency
(``write_latency``, ``recall_latency``), and recall of past conversations
(``conversation_bench``, on the set in ``data/``)."""
