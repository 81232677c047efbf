"""Bring your own chat model and embeddings.

Any LangChain ``BaseChatModel`` can write the answers, and any LangChain ``Embeddings`` can
embed the chunks. Both classes below are complete, offline and deterministic, so they also
show exactly what the agent asks of a model:

* answers: a plain chat call (system prompt with numbered passages, then the question);
  streaming works when the model implements ``_stream``;
* grades: ``with_structured_output(Grade)``: most providers implement it through tool
  calling; a model without tools can implement it directly, as here.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from typing import Any

from _common import HANDBOOK, scratch_data_dir
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableLambda

from retrievalagent import Grade, init_agent


class FirstSentenceModel(BaseChatModel):
    """Answers with the first sentence of the top passage, cited; grades by word overlap."""

    @property
    def _llm_type(self) -> str:
        return "first-sentence"

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        match = re.search(r"\[1\][^\n]*\n(.+?)(?:\.|\n|$)", system)
        return f"{match.group(1).strip()}. [1]" if match else "I could not find that."

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._reply(messages)))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        for word in re.findall(r"\S+\s*", self._reply(messages)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        def grade(messages: Any) -> Grade:
            text = str(messages[-1].content).lower()
            question, _, rest = text.partition("passages")
            overlap = set(re.findall(r"\w{4,}", question)) & set(re.findall(r"\w{4,}", rest))
            confidence = min(1.0, 0.3 + 0.2 * len(overlap))
            return Grade(sufficient=confidence >= 0.5, confidence=confidence)

        return RunnableLambda(grade)


class HashedWordEmbeddings(Embeddings):
    """Bag-of-words vectors through feature hashing: no model file, no network."""

    def __init__(self, dimension: int = 512) -> None:
        self.dimension = dimension

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        for word in re.findall(r"\w+", text.lower()):
            index = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
            vector[index % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def main() -> None:
    scratch_data_dir()
    with init_agent(
        "custom-example",
        backend_url=":memory:",
        model=FirstSentenceModel(),
        embeddings=HashedWordEmbeddings(),
    ) as rag:
        rag.add_documents(HANDBOOK)
        state = rag.invoke("What does error LF-409 mean?")
        print("answer:", state.answer)
        print("written by:", state.generated_by)
        print("grade:", state.grade)
        tokens = [
            e["text"] for e in rag.stream("How often is a snapshot taken?") if e["type"] == "token"
        ]
        print("streamed:", tokens)


if __name__ == "__main__":
    main()
