"""A zero-latency chat model for timing the graph: LangChain's fake model + a fixed grade.

Only the model's words are fake; the graph, callbacks and message handling are real.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.runnables import Runnable, RunnableLambda

from retrievalagent.types import Grade

GRADE = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}


class InstantChatModel(FakeListChatModel):
    """Answers at once; ``with_structured_output(Grade)`` returns a fixed sufficient grade."""

    responses: list[str] = ["The passages answer it [1]."]  # noqa: RUF012 - pydantic field

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(_: Any) -> Any:
            if isinstance(schema, type) and issubclass(schema, Grade):
                return Grade.model_validate(GRADE)
            return dict(GRADE)

        return RunnableLambda(grade)
