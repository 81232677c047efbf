"""Long-term memory: recall before retrieval, fire-and-forget writes after grading.

Two backends share one Protocol: mem0 (``mem0_memory=`` or ``memory=True``) and any
LangGraph store (``memory_store=``). mem0 wins when both are given. Three kinds of memory
live in either: search facts, preferences and conversation memory (what each user said in
earlier conversations); ``MemoryReader`` decides what a turn recalls of them and
``ConversationWriter`` stores what was said.
"""

from __future__ import annotations

from retrievalagent.memory._background import BackgroundWrites
from retrievalagent.memory._base import (
    CONVERSATION,
    JOINED,
    PREFERENCE,
    MemoryBackend,
    MemoryHit,
    MemoryRecord,
    Recall,
    RecallRequest,
    kind_of,
    memory_info,
    user_id_from_config,
)
from retrievalagent.memory._conversations import (
    CONVERSATION_KEYS,
    EARLIER,
    MESSAGE_KEYS,
    NOTHING_FOUND,
    OPENAI_MESSAGE_KEYS,
    ConversationRecord,
    Said,
    earliest,
    responses_item,
    said_in,
    said_of,
    something_said,
    unread_keys,
    unread_warning,
    user_statements,
)
from retrievalagent.memory._embedded import embedded_mem0, embedded_mem0_path, prepare_mem0_import
from retrievalagent.memory._extract import ExtractedFact, FactExtractor
from retrievalagent.memory._keys import alias_key, typed_alias
from retrievalagent.memory._mem0 import Mem0Backend
from retrievalagent.memory._preferences import (
    PREFERENCE_WORDS,
    Preference,
    asks,
    by_subject,
    find_preference,
    last_stated,
    subject_of,
)
from retrievalagent.memory._recall import MemoryReader, ReadPolicy, ReadResult, alias_of
from retrievalagent.memory._store import StoreBackend
from retrievalagent.memory._temporal import dated_line, iso, parse_time
from retrievalagent.memory._writer import ConversationWriter, Imported

__all__ = [
    "CONVERSATION",
    "CONVERSATION_KEYS",
    "EARLIER",
    "JOINED",
    "MESSAGE_KEYS",
    "NOTHING_FOUND",
    "OPENAI_MESSAGE_KEYS",
    "PREFERENCE",
    "PREFERENCE_WORDS",
    "BackgroundWrites",
    "ConversationRecord",
    "ConversationWriter",
    "ExtractedFact",
    "FactExtractor",
    "Imported",
    "Mem0Backend",
    "MemoryBackend",
    "MemoryHit",
    "MemoryReader",
    "MemoryRecord",
    "Preference",
    "ReadPolicy",
    "ReadResult",
    "Recall",
    "RecallRequest",
    "Said",
    "StoreBackend",
    "alias_key",
    "alias_of",
    "asks",
    "by_subject",
    "dated_line",
    "earliest",
    "embedded_mem0",
    "embedded_mem0_path",
    "find_preference",
    "iso",
    "kind_of",
    "last_stated",
    "memory_info",
    "parse_time",
    "prepare_mem0_import",
    "responses_item",
    "said_in",
    "said_of",
    "something_said",
    "subject_of",
    "typed_alias",
    "unread_keys",
    "unread_warning",
    "user_id_from_config",
    "user_statements",
]
