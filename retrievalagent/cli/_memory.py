"""``retrievalagent memory list|search|import|forget``: what the agent remembers of a user.

A user must be able to see what the agent keeps about them and have it erased; an
operator can import earlier conversations (``import``) and check what a question would
recall (``search``). The memory read is the collection's embedded mem0 (``memory=True``,
under the data dir) unless ``--store`` names a PostgreSQL store (the
``memory_store=PostgresStore`` of a deployment).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from retrievalagent._inputs import NAMED_AFTER_WHAT_WAS_SAID, check_name
from retrievalagent.cli._common import (
    HELP_MARKUP,
    CollectionOpt,
    DataDirOpt,
    collection_name,
    console,
    err,
    handle_errors,
    open_agent,
)
from retrievalagent.errors import ConfigError
from retrievalagent.memory import (
    CONVERSATION_KEYS,
    MESSAGE_KEYS,
    OPENAI_MESSAGE_KEYS,
    Said,
    embedded_mem0_path,
    parse_time,
    responses_item,
    said_of,
    something_said,
)

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="See and erase what the agent remembers about a user.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)

UserArg = Annotated[
    str | None, typer.Argument(help="The user id (configurable.user_id), or give --user.")
]
UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user id (configurable.user_id).")]
UserFlag = Annotated[
    str | None, typer.Option("--user", "-u", help="The user id, as the other commands take it.")
]


def _user(argument: str | None, flag: str | None) -> str:
    """The user of ``list``/``forget``: given as USER or as --user (as ``import`` and
    ``search`` take it), once."""
    if (argument is None) == (flag is None):
        raise ConfigError(
            "give the user once: as USER or as --user"
            if argument is not None
            else "missing the user: give USER or --user"
        )
    value, what = (argument, "USER") if argument is not None else (flag or "", "--user")
    return check_name(value, what)  # before a command asks to erase "everything of ''"


StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="A postgresql:// URL of the PostgresStore holding the memories "
        "(default: the collection's embedded mem0, as memory=True keeps it).",
    ),
]


@contextmanager
def _memory_agent(
    collection: str | None, store: str | None, data_dir: Path | None
) -> Iterator[Any]:
    """The agent of a memory command. Memory never reads the document index, so it opens a
    throwaway one: a user can import and read memories before (or without) ingesting
    anything, and no empty collection is left on disk for ``ask`` to find."""
    if store is None:
        with open_agent(collection, None, ":memory:", data_dir, memory=True) as rag:
            yield rag
        return
    if not store.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"--store must be a postgresql:// URL, not {store!r}")
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(store) as pg:
        pg.setup()
        with open_agent(collection, None, ":memory:", data_dir, memory_store=pg) as rag:
            yield rag


def _keeps_none(collection: str | None, store: str | None, data_dir: Path | None) -> str:
    """Why a reading command finds nothing without opening the memory, when the collection
    keeps none on disk (a mistyped ``-c``): opening it would leave an empty one behind.
    "" when there is memory to read (or it lives in ``--store``)."""
    if store is not None:
        return ""
    from retrievalagent import Settings
    from retrievalagent.config import check_collection

    name = check_collection(collection_name(collection))
    root = Path(Settings.load(data_dir=data_dir).data_dir)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"the data dir {root} is a file, not a folder (--data-dir, RAG_DATA_DIR)")
    if embedded_mem0_path(root, name).exists():
        return ""
    others = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    kept = [other for other in others if embedded_mem0_path(root, other).is_dir()]
    where = f"collections with memories there: {', '.join(kept)}" if kept else "none has any"
    return f"collection {name!r} keeps no memories in {root} ({where})"


@memory_app.command("list")
def list_memories(
    user: UserArg = None,
    user_flag: UserFlag = None,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Everything remembered about USER, newest first."""
    with handle_errors():
        user = _user(user, user_flag)
        none_kept = _keeps_none(collection, store, data_dir)
        memories = []
        if not none_kept:
            with _memory_agent(collection, store, data_dir) as rag:
                memories = rag.list_memories(user)
    if as_json:
        console.print_json(json.dumps(memories))
        if none_kept:  # the JSON stays what a script parses; why it is empty goes aside
            err.print(f"note: {escape(none_kept)}")
        return
    if not memories:
        console.print(
            f"nothing is remembered about {escape(user)!r}"
            + (f": {escape(none_kept)}" if none_kept else "")
        )
        return
    for m in memories:
        label = f"[{_kind(m['kind'], m.get('form', ''))}, {_day(m.get('at') or m['updated_at'])}]"
        text = " / ".join(line for line in m["text"].splitlines() if line.strip())
        console.print(f"{escape(m['id'])}  {escape(label)}  {escape(text)}", soft_wrap=True)


def _kind(kind: str, form: str = "") -> str:
    """A memory's kind as the API and ``--json`` name it, so the two read alike (a fact a
    model drew from a conversation says so)."""
    return f"{kind} fact" if kind == "conversation" and form == "fact" else kind


def _day(at: str) -> str:
    return at[:10] if at else "undated"


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="A question, as the user would ask it.")],
    user: UserOpt,
    k: Annotated[int, typer.Option("-k", help="Most memories shown.")] = 10,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What a question of USER would recall: every kind, best first."""
    with handle_errors():
        user = check_name(user, "--user")
        none_kept = _keeps_none(collection, store, data_dir)
        found = []
        if not none_kept:
            with _memory_agent(collection, store, data_dir) as rag:
                found = rag.recall(query, user_id=user, k=k)
    if as_json:
        console.print_json(json.dumps(found))
        if none_kept:  # the JSON stays what a script parses; why it is empty goes aside
            err.print(f"note: {escape(none_kept)}")
        return
    if not found:
        console.print(
            f"nothing remembered about {escape(user)!r} comes up for this question"
            + (f": {escape(none_kept)}" if none_kept else "")
        )
        return
    for hit in found:
        label = f"[{_kind(hit['kind'])}, {_day(hit['at'])}, score {hit['score']:.2f}]"
        console.print(f"{escape(label)}  {escape(hit['text'])}", soft_wrap=True)


@memory_app.command("import")
def import_history(
    file: Annotated[
        Path,
        typer.Argument(
            help='JSON lines of OpenAI-style messages ({"role": ..., "content": ...}): '
            "one conversation per file, or one per line (a list of messages, or an object "
            'with "messages" and optionally "thread_id" and "at").'
        ),
    ],
    user: UserOpt,
    thread: Annotated[
        str | None, typer.Option("--thread", help="The conversation's id (one per file).")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="When it took place (ISO 8601; default: the earliest time its messages give "
            'under "at", "timestamp", "created_at" or "create_time", else now).',
        ),
    ] = None,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Remember earlier conversations of USER, as if they had been had with the agent."""
    with handle_errors():
        user = check_name(user, "--user")
        if thread is not None:
            thread = check_name(thread, "--thread", NAMED_AFTER_WHAT_WAS_SAID)
        _when(at, "--at")
        writing = False
        try:
            # every line is checked before anything is stored: a bad one stops the import
            conversations = read_conversations(file, at=at)
            named = _named(conversations, file, thread, at)
            with _memory_agent(collection, store, data_dir) as rag:
                # embedded and written a few hundred texts at a time, across conversations
                writing = True
                stored = len(rag.remember_many(named, user_id=user))
        except KeyboardInterrupt:
            err.print(
                "interrupted: what was written before it stays remembered; run the same "
                "command again to import the rest (nothing already stored is stored twice)"
                if writing
                else "interrupted before anything was stored: nothing was imported",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
    console.print(
        f"imported {len(conversations)} conversation(s) of {escape(user)!r}: "
        f"{stored} new memor{'y' if stored == 1 else 'ies'}"
    )


def _named(
    conversations: list[dict[str, Any]], file: Path, thread: str | None, at: str | None
) -> list[dict[str, Any]]:
    """The conversations as ``remember_many`` takes them, named and dated by ``--thread``
    and ``--at`` where their lines do not say."""
    if thread is not None and len(conversations) > 1:
        raise ConfigError(
            f"--thread names one conversation, and {file} holds {len(conversations)}: "
            'give each line its own "thread_id", or leave --thread out to name each '
            "conversation after what was said"
        )
    named = []
    for conversation in conversations:
        # without an id, a conversation is named after what was said (by remember):
        # importing it again, from a renamed file or another line, stores nothing new
        thread_id = conversation.get("thread_id") or thread
        at_ = conversation.get("at") or at
        named.append({"messages": conversation["messages"], "thread_id": thread_id, "at": at_})
    return named


def _json_lines(path: Path) -> list[str]:
    """The lines of ``path``: ``str.splitlines`` also breaks at U+2028, U+2029 and U+0085,
    which JSON allows raw inside a string, so a valid line was refused and the lines after
    it numbered wrong. Split at "\\n" only, once CRLF and CR are made "\\n" (as text mode
    reads them)."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path} line {line} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    # as text mode reads it: CRLF and CR end a line as "\n" does
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _json_rows(path: Path) -> list[tuple[int, Any]]:
    """Each line of ``path`` that is not blank, read as JSON, with its number."""
    rows = []
    lines = _json_lines(path)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line, object_pairs_hook=_no_repeats)))
        except json.JSONDecodeError as exc:
            if _one_document("\n".join(lines)):
                raise ConfigError(
                    f"{path} is one JSON document written over several lines, and import "
                    "reads JSON lines: one message or one conversation a line. Write it so "
                    "(a list of conversations: jq -c '.[]' FILE; a list of messages: "
                    "jq -c . FILE, one line)"
                ) from None
            raise ConfigError(f"{path} line {number} is not JSON: {exc.msg}") from None
        except RecursionError:
            raise ConfigError(
                f"{path} line {number} nests lists or objects too deeply to be a conversation"
            ) from None
        except _RepeatedKey as exc:
            raise ConfigError(
                f"{path} line {number}: the key {_shown(exc.key)} is given twice (JSON keeps "
                "only the last)"
            ) from None
    return rows


def _one_document(text: str) -> bool:
    """Whether ``text`` (a file's) is one JSON list or object over several lines (a
    pretty-printed export), which a line of it alone is not."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, list | dict)


def read_conversations(path: Path, at: str | None = None) -> list[dict[str, Any]]:
    """The conversations in a JSON-lines file (see ``import``), each ``{"messages": [...]}``
    with its ``thread_id`` and ``at`` where the line gives them (``at``: ``--at``, which
    dates a conversation whose line does not, its messages' own times unread)."""
    rows = _json_rows(path)
    if not rows:
        raise ConfigError(f"{path} holds no messages")
    for number, row in rows:
        _unreadable(path, number, row)

    if _one_kind(path, rows):
        # one conversation, a message a line
        messages = [row for _, row in rows]
        return [_checked(path, {"messages": messages}, [number for number, _ in rows], at)]
    conversations = []
    for number, row in rows:
        if isinstance(row, list):
            row = {"messages": row}
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            raise ConfigError(
                f"{path} line {number}: expected a message, a list of messages or an object "
                'with "messages"'
            )
        conversations.append(_checked(path, row, [number] * max(1, len(row["messages"])), at))
    return conversations


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, or ``_RepeatedKey``: of a key given twice JSON keeps the last,
    dropping the other unread."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _is_message(row: Any) -> bool:
    """A message, or a Responses API item that is not one (a tool call, reasoning), which
    import skips as it skips tool messages."""
    return isinstance(row, dict) and ("role" in row or responses_item(row))


def _unreadable(path: Path, number: int, row: Any) -> None:
    """``ConfigError`` for a line that is neither a message nor a conversation because a
    key is misspelt ("Role", "Messages"): the key is named, not the file's shape."""
    if not isinstance(row, dict) or "role" in row or "messages" in row or responses_item(row):
        return
    for key in row:
        if hint := _nearest(str(key), ("role", "messages")):
            raise ConfigError(
                f"{path} line {number} has the key {_shown(str(key))}, which import does not "
                f"read; {hint}a line is a message (with 'role') or a conversation (with "
                "'messages')"
            )


def _one_kind(path: Path, rows: list[tuple[int, Any]]) -> bool:
    """Whether ``rows`` are the messages of one conversation (else each is a
    conversation); ``ConfigError`` naming the first line of the other kind if mixed."""
    first_kind = _is_message(rows[0][1])
    odd = next((number for number, row in rows if _is_message(row) != first_kind), None)
    if odd is not None:
        raise ConfigError(
            f"{path} line {odd}: a file holds either one conversation, a message a line, or a "
            'conversation a line (a list of messages or an object with "messages"), not both; '
            f"line {rows[0][0]} is {'a message' if first_kind else 'a conversation'}"
        )
    return first_kind


def _when(at: Any, what: str) -> None:
    try:
        parse_time(at, what, past=True)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def _checked(
    path: Path, conversation: dict[str, Any], lines: list[int], at: str | None
) -> dict[str, Any]:
    """``conversation`` (read from ``lines`` of ``path``, one per message) if ``remember``
    will take it; else ``ConfigError`` naming the line."""
    messages = conversation["messages"]
    times = conversation.get("at") is None and at is None  # a time given wins over theirs
    _known_keys(path, lines[0], conversation, "the conversation", CONVERSATION_KEYS)
    everything_said: list[Said] = []
    for position, (line, message) in enumerate(zip(lines, messages, strict=False)):
        if isinstance(message, dict) and not responses_item(message):
            _known_keys(
                path,
                line,
                message,
                f"message {position}",
                MESSAGE_KEYS,
                OPENAI_MESSAGE_KEYS,
                "; what else a message should keep goes in 'metadata'",
            )
        try:
            if (said := said_of(message, position, strict=True, times=times)) is not None:
                everything_said.append(said)
        except ValueError as exc:
            raise ConfigError(f"{path} line {line}: {exc}") from None
    try:
        something_said(everything_said)
        if conversation.get("at") is not None:
            _when(conversation["at"], "at")
        if conversation.get("thread_id") is not None:
            check_name(conversation["thread_id"], "thread_id", NAMED_AFTER_WHAT_WAS_SAID)
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"{path} line {lines[0]}: {exc}") from None
    return conversation


def _known_keys(
    path: Path,
    line: int,
    row: dict[str, Any],
    what: str,
    known: tuple[str, ...],
    ignored: frozenset[str] = frozenset(),
    advice: str = "",
) -> None:
    """``ConfigError`` for a key the import would drop unread: a misspelt "thread" or
    "nmae" would lose a conversation's id or a speaker without a word."""
    key = next((k for k in row if k not in known and k not in ignored), None)
    if key is None:
        return
    raise ConfigError(
        f"{path} line {line}: {what} has the key {_shown(key)}, which import does not read; "
        f"{_nearest(key, known)}it reads {', '.join(repr(k) for k in known)}{advice}"
    )


def _shown(key: str) -> str:
    """A key as an error names it: a pasted paragraph as a key is cut."""
    return repr(key if len(key) <= 60 else key[:57] + "...")


def _nearest(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key.casefold(), known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


@memory_app.command("forget")
def forget(
    user: UserArg = None,
    memory_id: Annotated[
        str | None, typer.Option("--id", help="Erase only this memory (an id from 'list').")
    ] = None,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    data_dir: DataDirOpt = None,
    thread: Annotated[
        str | None,
        typer.Option("--thread", help="Erase what was remembered from this conversation only."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    user_flag: UserFlag = None,
) -> None:
    """Erase one memory of USER (--id), one conversation's (--thread), or all of them."""
    with handle_errors():
        user = _user(user, user_flag)
    if memory_id is None and thread is None and not yes:
        typer.confirm(f"Erase everything remembered about {user!r}?", abort=True)
    with handle_errors():
        if thread is not None:
            thread = check_name(thread, "--thread", "leave it out to erase everything")
        if memory_id is not None:
            memory_id = check_name(memory_id, "--id", "take one from `memory list`")
        if none_kept := _keeps_none(collection, store, data_dir):
            raise ConfigError(f"nothing to erase: {none_kept}")
    with handle_errors(), _memory_agent(collection, store, data_dir) as rag:
        # one not given is left out: forget refuses None (it would erase everything)
        given = {"memory_id": memory_id, "thread_id": thread}
        erased = rag.forget(user, **{k: v for k, v in given.items() if v is not None})
        if memory_id is not None and erased == 0:
            raise ConfigError(f"user {user!r} has no memory with id {memory_id!r}")
        if thread is not None and erased == 0:
            raise ConfigError(f"nothing is remembered of {user!r} from conversation {thread!r}")
    console.print(f"erased {erased} memor{'y' if erased == 1 else 'ies'} of {escape(user)!r}")
