"""Conversation memory with a model: the facts a user stated about themselves.

The model reads the user's own messages of an exchange (only theirs: facts about the user
come from the user) and returns facts with a subject each, through structured output.
What it fills is not trusted: ``checked_facts`` (memory) drops any fact with a number or
name the user did not type before anything is stored. The call runs in the background
after the answer, and only when the user said something about themselves (see
``memory._conversations.mentions_self``), so most turns cost no extra call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from retrievalagent.memory import ExtractedFact
from retrievalagent.models._llm import model_name
from retrievalagent.models._prompts import FACTS_HUMAN, FACTS_SYSTEM
from retrievalagent.models._retry import RetryPolicy
from retrievalagent.models._usage import ametered_call, metered_call

__all__ = ["LLMFactExtractor", "UserFacts"]


class UserFact(BaseModel):
    """One durable fact about the user."""

    subject: str = Field(
        description="What it is about, one to three words: 'database', 'operating system', "
        "'home city', 'employer'. Reuse a known subject when the fact updates it."
    )
    fact: str = Field(
        description="One short sentence in the third person, with the user's own names and "
        "numbers, e.g. 'Runs PostgreSQL 13 on Debian 11.'"
    )
    turns: list[int] = Field(
        default_factory=list, description="The numbers of the user messages it comes from."
    )


class UserFacts(BaseModel):
    """The durable facts in the user's messages (an empty list when there are none)."""

    facts: list[UserFact] = Field(default_factory=list)


class LLMFactExtractor:
    """``memory.FactExtractor`` with a chat model's structured output."""

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.runnable = model.with_structured_output(UserFacts)
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()

    @staticmethod
    def messages(said: Sequence[str], known: Sequence[str]) -> list[BaseMessage]:
        numbered = "\n".join(f"[{i}] {text}" for i, text in enumerate(said))
        human = FACTS_HUMAN.format(known=", ".join(known) or "(none)", messages=numbered)
        return [SystemMessage(FACTS_SYSTEM), HumanMessage(human)]

    @staticmethod
    def parse(reply: Any) -> list[ExtractedFact]:
        if isinstance(reply, BaseModel):
            reply = reply.model_dump()
        facts = UserFacts.model_validate(reply).facts
        return [ExtractedFact(f.subject, f.fact, tuple(f.turns)) for f in facts]

    def extract(self, said: Sequence[str], known: Sequence[str]) -> list[ExtractedFact]:
        messages = self.messages(said, known)
        call = lambda: self.runnable.invoke(messages)  # noqa: E731
        return self.parse(metered_call("memory", messages, call, self.retry, self.name))

    async def aextract(self, said: Sequence[str], known: Sequence[str]) -> list[ExtractedFact]:
        messages = self.messages(said, known)
        call = lambda: self.runnable.ainvoke(messages)  # noqa: E731
        return self.parse(await ametered_call("memory", messages, call, self.retry, self.name))
