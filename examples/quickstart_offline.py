"""Quick start, offline: index a folder and ask questions about it.

    python examples/quickstart_offline.py                      # the bundled sample handbook
    python examples/quickstart_offline.py ./my-notes "How do I rotate the API keys?"

No API key, no server: the packaged embedding model, an embedded Qdrant index and
extractive answers (sentences from the best passages, with citations).
"""

from __future__ import annotations

import sys

from _common import scratch_data_dir

from retrievalagent import init_agent, sample_docs_path

DEFAULT_QUESTIONS = [
    "What does error code LF-409 mean?",
    "How often are snapshots taken by default?",
]


def main(argv: list[str]) -> None:
    scratch_data_dir()
    folder = argv[0] if argv else sample_docs_path()
    questions = argv[1:] or DEFAULT_QUESTIONS

    with init_agent("quickstart") as rag:
        print(rag.add_documents(folder))
        for question in questions:
            state = rag.invoke(question)
            print(f"\nQ: {question}\nA: {state.answer}")
            for number, source in enumerate(state.sources[:3], 1):
                where = " > ".join(source["headings"]) or source["source"]
                print(f"  [{number}] {where} (score {source['score']:.2f})")
            print(f"  ({state.generated_by})")


if __name__ == "__main__":
    main(sys.argv[1:])
