"""Helpers shared by the tests and the benchmarks (no tests here).

* ``chat`` — the one fake chat model: a real ``BaseChatModel`` whose words are scripted.
* ``memory`` — an offline mem0 config, memory records and the sample questions.
* ``persistence`` — a tiny corpus and PostgreSQL schema URLs for the checkpointer tests.
"""
