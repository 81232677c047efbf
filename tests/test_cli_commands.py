"""The command line, through typer's CliRunner: output a person reads, and clean errors."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from retrievalagent.cli import app


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("RAG_COLLECTION", raising=False)
    monkeypatch.delenv("RAG_MODEL", raising=False)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "errors.md").write_text(
        "# Error codes\n\n## LF-409\n\nThe vault is locked by another process.\n"
    )
    (folder / "snapshots.md").write_text(
        "# Snapshots\n\nA snapshot is taken every six hours and kept for thirty days.\n"
    )
    return folder


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_graph_prints_the_real_graph_as_mermaid(runner: CliRunner, notes: Path) -> None:
    from langgraph.store.memory import InMemoryStore

    from retrievalagent import init_agent

    result = invoke(runner, "graph")
    assert result.exit_code == 0
    with init_agent("graph-test", backend_url=":memory:", memory_store=InMemoryStore()) as rag:
        expected = rag.graph.get_graph().draw_mermaid()
    assert result.stdout.strip() == expected.strip()
    assert "read_memory --> lexical_search;" in result.stdout
    assert "prepare --> dense_search;" in result.stdout  # recall beside the vector search

    plain = invoke(runner, "graph", "--no-memory")
    assert plain.exit_code == 0
    with init_agent("graph-test", backend_url=":memory:") as rag:
        assert plain.stdout.strip() == rag.graph.get_graph().draw_mermaid().strip()
    assert "read_memory --> dense_search;" in plain.stdout  # nothing to overlap: one line


def test_ingest_then_ask_with_a_trace_tree(runner: CliRunner, notes: Path) -> None:
    first = invoke(runner, "ingest", str(notes), "--collection", "cli-notes")
    assert first.exit_code == 0, first.output
    assert "2 source(s): 2 new" in first.stdout
    assert "collection 'cli-notes' holds" in first.stdout
    assert "Indexing" in first.stderr  # says what it is doing before the slow part

    again = invoke(runner, "ingest", str(notes), "--collection", "cli-notes")
    assert "2 unchanged" in again.stdout

    asked = invoke(runner, "ask", "What does LF-409 mean?", "-c", "cli-notes", "--trace")
    assert asked.exit_code == 0, asked.output
    out = asked.stdout
    assert "locked by another process" in out
    assert "Sources:" in out and "errors.md" in out
    assert "offline mode" in out
    # the trace is a tree: one branch per node, its fields beneath
    assert out.index("trace") < out.index("├── prepare") < out.index("write_memory")
    assert "│   ├── method: adaptive" in out or "│   ├── method:" in out
    assert "└── write_memory" in out


def test_ask_says_when_the_documents_may_not_cover_the_question(
    runner: CliRunner, notes: Path
) -> None:
    assert invoke(runner, "ingest", str(notes), "-c", "cover").exit_code == 0
    covered = invoke(runner, "ask", "What does LF-409 mean?", "-c", "cover")
    assert "insufficient" not in covered.stdout
    off_topic = invoke(runner, "ask", "What is the capital of France?", "-c", "cover")
    assert off_topic.exit_code == 0, off_topic.output
    assert "judged this answer insufficient (confidence" in off_topic.stdout
    assert "may not cover the question" in off_topic.stdout


def test_an_empty_collection_name_is_refused_not_replaced_by_the_default(
    runner: CliRunner, notes: Path
) -> None:
    assert invoke(runner, "ingest", str(notes)).exit_code == 0  # into the default collection
    for command in (["sources", "-c", ""], ["ask", "What is LF-409?", "-c", ""]):
        result = invoke(runner, *command)
        assert result.exit_code == 1, (command, result.output)
        assert "collection=''" in result.output and "errors.md" not in result.output


def test_sources_of_an_empty_collection_say_so(runner: CliRunner, notes: Path) -> None:
    empty = notes / "empty"
    empty.mkdir()
    assert invoke(runner, "ingest", str(empty), "-c", "nothing").exit_code == 0
    listed = invoke(runner, "sources", "-c", "nothing")
    assert listed.exit_code == 0 and listed.stdout == ""
    assert "collection 'nothing' holds no sources yet" in listed.stderr


def test_collection_defaults_to_rag_collection(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_COLLECTION", "from-env")
    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    listed = invoke(runner, "sources")
    assert listed.exit_code == 0
    assert "errors.md" in listed.stdout and "snapshots.md" in listed.stdout


def test_errors_are_one_clear_line(runner: CliRunner, notes: Path) -> None:
    result = invoke(runner, "ask", "anything?", "--collection", "never-filled")
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: collection 'never-filled' does not exist")
    assert "retrievalagent ingest PATH --collection never-filled" in lines[0]
    assert "--debug" in lines[1] and len(lines) == 2
    assert "Traceback" not in result.output

    bad = invoke(runner, "ask", "x", "--collection", "no spaces allowed")
    assert bad.exit_code == 1
    assert bad.stderr.splitlines()[0].startswith("error: collection='no spaces allowed' is invalid")


def test_bad_env_value_is_one_line_naming_the_variable(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_TOP_K", "many")
    result = invoke(runner, "sources")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: environment variable RAG_TOP_K='many' is invalid")


def test_debug_shows_the_traceback(runner: CliRunner, notes: Path) -> None:
    from retrievalagent import ConfigError

    with pytest.raises(ConfigError, match="is invalid"):
        invoke(runner, "--debug", "ask", "x", "--collection", "no spaces allowed")


def test_missing_path_is_reported_not_indexed(runner: CliRunner, notes: Path) -> None:
    result = invoke(runner, "ingest", "./does-not-exist.md", "-c", "cli-notes")
    assert result.exit_code == 1
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "does-not-exist.md" in error and "no such file or folder" in error


@pytest.mark.parametrize("typo", ["my-notes", "A/nope", "docs/notes", "my notes", "C:\\docs"])
def test_a_mistyped_path_is_an_error_not_a_sentence(
    runner: CliRunner, notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typo: str
) -> None:
    import os

    monkeypatch.chdir(tmp_path)  # where none of them exists
    result = invoke(runner, "ingest", typo, "-c", "typo")
    assert result.exit_code == 1
    assert f"error: cannot ingest {typo}: no such file or folder" in result.stderr
    assert "new" not in result.stdout
    assert not (Path(os.environ["RAG_DATA_DIR"]) / "typo").exists()


def test_an_empty_path_is_refused_not_read_as_the_current_folder(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(notes)  # a folder "." would index
    result = invoke(runner, "ingest", "", "-c", "blank")
    assert result.exit_code != 0 and "PATH is empty" in result.stderr
    assert "new" not in result.stdout


def test_help_lists_every_command(runner: CliRunner) -> None:
    result = invoke(runner, "--help")
    assert result.exit_code == 0
    for command in ("demo", "ingest", "ask", "chat", "graph", "sources", "delete"):
        assert command in result.stdout


def test_memory_list_and_forget_show_and_erase_what_is_remembered(
    runner: CliRunner, notes: Path, postgres_url: str
) -> None:
    """A user sees what the agent keeps about them and can have it erased, for the
    embedded mem0 (memory=True) and for a PostgresStore."""
    import uuid

    from langgraph.store.postgres import PostgresStore

    from retrievalagent import init_agent

    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    user = f"ann lee {uuid.uuid4().hex[:6]}"  # a space: every backend must accept it
    with PostgresStore.from_conn_string(postgres_url) as pg:
        pg.setup()
        for kwargs, store_args in (
            ({"memory": True}, []),
            ({"memory_store": pg}, ["--store", postgres_url]),
        ):
            with init_agent("notes", **kwargs) as rag:
                rag.invoke(
                    "I prefer answers in German.", config={"configurable": {"user_id": user}}
                )
            listed = invoke(runner, "memory", "list", user, "-c", "notes", *store_args)
            today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
            assert listed.exit_code == 0
            assert f"[preference, {today}]  Answer in German." in listed.stdout
            # what the user said is kept too, as conversation memory, dated
            assert f"[conversation, {today}]  user: I prefer answers in German." in listed.stdout
            as_json = invoke(runner, "memory", "list", user, "-c", "notes", "--json", *store_args)
            kinds = {m["kind"]: m for m in json.loads(as_json.stdout)}
            assert set(kinds) == {"preference", "conversation"}
            memory = kinds["preference"]
            assert memory["key"] == "language"
            wrong = runner.invoke(
                app, ["memory", "forget", user, "-c", "notes", "--id", "nope", *store_args]
            )
            assert wrong.exit_code == 1 and "no memory with id 'nope'" in wrong.stderr
            gone = invoke(
                runner, "memory", "forget", user, "-c", "notes", "--id", memory["id"], *store_args
            )
            assert gone.exit_code == 0 and "erased 1 memory" in gone.stdout
            left = invoke(runner, "memory", "list", user, "-c", "notes", *store_args)
            assert "[preference" not in left.stdout and "[conversation" in left.stdout
            everything = invoke(runner, "memory", "forget", user, "-c", "notes", "-y", *store_args)
            assert everything.exit_code == 0 and "erased 1 memory" in everything.stdout
            empty = invoke(runner, "memory", "list", user, "-c", "notes", *store_args)
            assert "nothing is remembered" in empty.stdout
    refused = runner.invoke(app, ["memory", "list", "bob", "-c", "notes", "--store", "sqlite:///x"])
    assert refused.exit_code == 1 and "postgresql://" in refused.stderr


def _jsonl(path: Path, *rows: Any) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_memory_import_search_list_and_forget_a_conversation(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """Earlier conversations imported from JSON lines (one per file, or one per line) are
    recalled by `memory search`, listed with their kind and date, erased by --thread."""
    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    one = _jsonl(
        tmp_path / "ops.jsonl",
        {"role": "user", "content": "Our vault runs on PostgreSQL 13.", "metadata": {"ts": 1}},
        {"role": "assistant", "content": "Noted: PostgreSQL 13."},
    )
    many = _jsonl(
        tmp_path / "chats.jsonl",
        # a ChatGPT-style export's time (seconds since 1970) dates its conversation
        [
            {
                "role": "user",
                "content": "The printer on floor 2 jams on A3 paper.",
                "create_time": 1710408600.0,
                "update_time": 1710408700.0,  # an export's edit time: not refused, not read
            }
        ],
        {
            "messages": [{"role": "user", "content": "The VPN drops every hour since Monday."}],
            "thread_id": "vpn",
            "at": "2026-01-05T10:00:00Z",
        },
    )

    def memory(*args: str) -> Any:
        return runner.invoke(app, ["memory", *args, "-c", "notes"], catch_exceptions=False)

    first = memory("import", str(one), "--user", "ann")
    assert first.exit_code == 0, first.output
    assert "imported 1 conversation(s) of 'ann': 1 new memory" in first.stdout
    again = memory("import", str(one), "--user", "ann")
    assert "0 new memories" in again.stdout  # the same file twice: stored once
    both = memory("import", str(many), "--user", "ann")
    assert "imported 2 conversation(s) of 'ann': 2 new memories" in both.stdout
    found = memory("search", "Which PostgreSQL version is the vault on?", "--user", "ann")
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    assert found.exit_code == 0
    assert re.search(
        rf"\[conversation, {today}, score 0\.\d\d\]  user: Our vault runs on PostgreSQL 13",
        found.stdout,
    )
    hits = json.loads(memory("search", "VPN drops", "--user", "ann", "--json").stdout)
    assert hits[0]["thread_id"] == "vpn" and hits[0]["at"].startswith("2026-01-05")
    listed = memory("list", "ann").stdout
    assert "[conversation, 2026-01-05]  user: The VPN drops every hour since Monday." in listed
    assert (
        f"[conversation, {today}]  user: Our vault runs on PostgreSQL 13. / assistant: Noted"
        in listed
    )
    assert "[conversation, 2024-03-14]  user: The printer on floor 2 jams on A3 paper." in listed
    nobody = memory("search", "VPN drops", "--user", "bob")
    assert "nothing remembered about 'bob' comes up" in nobody.stdout
    gone = memory("forget", "ann", "--thread", "vpn")
    assert gone.exit_code == 0 and "erased 1 memory of 'ann'" in gone.stdout
    assert "VPN" not in memory("list", "ann").stdout
    assert "printer" in memory("list", "ann").stdout  # the others stay
    twice = memory("forget", "ann", "--thread", "vpn")
    assert twice.exit_code == 1 and "from conversation 'vpn'" in twice.stderr


@pytest.mark.parametrize("backend", ["embedded", "postgres"])
def test_memory_commands_work_before_anything_is_ingested(
    runner: CliRunner, notes: Path, tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    """A user imports their chat history on a fresh data dir, as the docs write the
    commands (the default collection, never ingested): import, search and list work,
    no empty collection is left on disk, and ask still says to ingest first."""
    store = ["--store", request.getfixturevalue("pg_schema_url")] if backend == "postgres" else []
    history = _jsonl(
        tmp_path / "one.jsonl",
        {"role": "user", "content": "Our build server is called Hopper.", "at": "2026-03-02"},
        {"role": "assistant", "content": "Noted: Hopper."},
    )

    imported = invoke(runner, "memory", "import", str(history), "--user", "alice", *store)
    assert imported.exit_code == 0, imported.output
    assert "imported 1 conversation(s) of 'alice': 1 new memory" in imported.stdout
    found = invoke(
        runner, "memory", "search", "What is the build server?", "--user", "alice", *store
    )
    assert found.exit_code == 0, found.output
    assert re.search(r"\[conversation, 2026-03-02, score 0\.\d\d\]  user: Our build", found.stdout)
    listed = invoke(runner, "memory", "list", "alice", *store)
    assert listed.exit_code == 0, listed.output
    assert "[conversation, 2026-03-02]  user: Our build server is called Hopper." in listed.stdout

    data_dir = Path(os.environ["RAG_DATA_DIR"])
    assert not (data_dir / "docs" / "index").exists()  # memory is all that was written
    if backend == "postgres":
        assert not (data_dir / "docs").exists()  # the memories are in PostgreSQL
    asked = invoke(runner, "ask", "What is the build server?")
    assert asked.exit_code == 1
    assert "collection 'docs' does not exist" in asked.stderr
    assert "retrievalagent ingest PATH --collection docs" in asked.stderr


def test_reading_a_mistyped_collection_says_so_and_writes_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    """`memory list/search/forget -c hbb` for a collection that keeps no memory: nothing
    found, the collections that do keep some named, and no empty memory left on disk for
    the typo (opening it created one)."""
    history = _jsonl(tmp_path / "one.jsonl", {"role": "user", "content": "My bike is a Brompton."})
    assert invoke(runner, "memory", "import", str(history), "--user", "ann").exit_code == 0
    data_dir = Path(os.environ["RAG_DATA_DIR"])
    hint = (
        f"collection 'hbb' keeps no memories in {data_dir} (collections with memories there: docs)"
    )
    listed = invoke(runner, "memory", "list", "ann", "-c", "hbb")
    assert listed.exit_code == 0 and hint in " ".join(listed.stdout.split()), listed.output
    found = invoke(runner, "memory", "search", "Which bike?", "--user", "ann", "-c", "hbb")
    assert found.exit_code == 0 and hint in " ".join(found.stdout.split()), found.output
    erased = invoke(runner, "memory", "forget", "ann", "-c", "hbb", "--yes")
    assert erased.exit_code == 1 and "nothing to erase" in erased.stderr, erased.output
    for command in (["list", "ann"], ["search", "Which bike?", "--user", "ann"]):
        as_json = invoke(runner, "memory", *command, "-c", "hbb", "--json")
        assert json.loads(as_json.stdout) == []  # what a script parses stays JSON
        assert hint in " ".join(as_json.stderr.split()), as_json.output  # and it says why
    assert not (data_dir / "hbb").exists()
    kept = invoke(runner, "memory", "list", "ann")  # the real one is untouched
    assert "My bike is a Brompton." in kept.stdout
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for command in (["list", "ann"], ["search", "Which bike?", "--user", "ann"]):
        refused = invoke(runner, "memory", *command, "--data-dir", str(a_file))
        assert refused.exit_code == 1 and "is a file, not a folder" in refused.stderr


def test_memory_list_and_search_label_each_memory_with_its_kind_as_json_names_it(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """The kind printed beside a memory is the one `--json` and the API give it (a
    conversation memory printed as "said" matched no kind a user could look up)."""
    from retrievalagent import init_agent

    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    said = {"role": "user", "content": "The auditors want our answers in German."}
    history = _jsonl(tmp_path / "h.jsonl", said)
    imported = invoke(runner, "memory", "import", str(history), "--user", "ann", "-c", "notes")
    assert imported.exit_code == 0, imported.output
    with init_agent("notes", memory=True) as rag:
        rag.invoke("I prefer answers in German.", config={"configurable": {"user_id": "ann"}})

    listed = invoke(runner, "memory", "list", "ann", "-c", "notes").stdout.splitlines()
    memories = json.loads(invoke(runner, "memory", "list", "ann", "-c", "notes", "--json").stdout)
    assert {m["kind"] for m in memories} == {"preference", "conversation"}
    assert [m["kind"] for m in memories] == [re.findall(r"\[(\w+), ", line)[0] for line in listed]
    query = ["search", "answers in German", "--user", "ann", "-c", "notes"]
    shown = invoke(runner, "memory", *query).stdout.splitlines()
    hits = json.loads(invoke(runner, "memory", *query, "--json").stdout)
    assert "conversation" in {hit["kind"] for hit in hits}
    assert [hit["kind"] for hit in hits] == [line[1 : line.index(",")] for line in shown]


def test_memory_import_of_a_renamed_export_stores_nothing_new(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """Conversations without an id are named after what was said, not after the file and
    line: the same export saved under another name, or with a conversation added at the
    top, stores only what is new; --thread cannot name several conversations."""
    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    vault = [{"role": "user", "content": "Our vault runs on PostgreSQL 13."}]
    printer = [{"role": "user", "content": "The printer on floor 2 jams on A3 paper."}]
    vpn = [{"role": "user", "content": "The VPN drops every hour since Monday."}]

    def memory(*args: str) -> Any:
        return runner.invoke(app, ["memory", *args, "-c", "notes"], catch_exceptions=False)

    first = memory(
        "import", str(_jsonl(tmp_path / "export-26.jsonl", vault, printer)), "--user", "ann"
    )
    assert "2 new memories" in first.stdout, first.output
    later = _jsonl(tmp_path / "export-27.jsonl", vpn, vault, printer)
    assert "1 new memory" in memory("import", str(later), "--user", "ann").stdout
    assert memory("list", "ann").stdout.count("PostgreSQL 13") == 1
    refused = memory("import", str(later), "--user", "ann", "--thread", "support")
    assert refused.exit_code == 1
    assert "--thread names one conversation" in refused.stderr and "holds 3" in refused.stderr


def test_memory_import_reads_a_responses_api_transcript_with_a_tool_call(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """Reasoning, a function call and its output are items without a role: skipped, as a
    tool message is; the user's words and the reply are remembered."""
    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "I fly to Oslo on Friday."}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "c1",
            "name": "weather",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "c1", "output": "rainy, 5C"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Pack a raincoat.", "annotations": []}],
        },
    ]
    done = runner.invoke(
        app,
        [
            "memory",
            "import",
            str(_jsonl(tmp_path / "r.jsonl", *items)),
            "--user",
            "ann",
            "-c",
            "notes",
        ],
    )
    assert done.exit_code == 0, done.output
    listed = invoke(runner, "memory", "list", "ann", "-c", "notes").stdout
    assert "I fly to Oslo on Friday. / assistant: Pack a raincoat." in listed
    assert "rainy" not in listed


def test_memory_import_reads_line_separators_inside_json_strings_as_text(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    """U+2028, U+2029 and U+0085 are legal raw in a JSON string (``ensure_ascii=False``
    writes them so): a line holding one is imported, and the lines after it keep their
    numbers; CRLF line ends are read too."""
    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    rows = [
        {"role": "user", "content": "The vault is on rack B4.\u2028Ask Sam\u2029for the\x85key."},
        {"role": "assistant", "content": "Noted."},
    ]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), "utf-8")
    done = runner.invoke(app, ["memory", "import", str(raw), "--user", "ann", "-c", "notes"])
    assert done.exit_code == 0, done.output
    assert "imported 1 conversation(s) of 'ann': 1 new memory" in done.stdout
    listed = invoke(runner, "memory", "list", "ann", "-c", "notes").stdout
    # each separator parts the words it stands between (before, U+2028 and U+2029 were
    # deleted: "B4.Ask Samfor the key.")
    assert "rack B4. Ask Sam for the key. / assistant: Noted." in listed, listed
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(rows[0], ensure_ascii=False) + "\n{\n", encoding="utf-8")
    refused = runner.invoke(app, ["memory", "import", str(broken), "--user", "ann", "-c", "notes"])
    assert refused.exit_code == 1 and "broken.jsonl line 2 is not JSON" in refused.stderr


def test_memory_import_refuses_bad_files_naming_the_file_and_line(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    good = {"role": "user", "content": "The VPN drops every hour."}
    not_json = tmp_path / "broken.jsonl"
    not_json.write_text(json.dumps(good) + "\nnot json\n", encoding="utf-8")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"role": "user", "content": "Caf"}\n{"role": "user", "content": "\xe9"}\n')
    # an export as most tools write it: one JSON list over many lines
    pretty = tmp_path / "export.json"
    pretty.write_text(json.dumps([{"messages": [good]}], indent=2), encoding="utf-8")
    (tmp_path / "folder").mkdir()
    cases = {
        str(not_json): "broken.jsonl line 2 is not JSON",
        str(tmp_path / "folder"): "folder is not a file",
        str(tmp_path / "missing.jsonl"): "missing.jsonl: no such file",
        str(latin): "latin.jsonl line 2 is not UTF-8",
        str(pretty): "export.json is one JSON document written over several lines",
        str(_jsonl(tmp_path / "empty.jsonl")): "holds no messages",
        # a bad message in the third conversation: named, and nothing of the file stored
        str(
            _jsonl(
                tmp_path / "role.jsonl",
                [good],
                [good, {"role": "user", "content": "It started on Monday."}],
                [{"role": "bot", "content": "beep"}],
            )
        ): "role.jsonl line 3: message 0 has role 'bot'",
        str(_jsonl(tmp_path / "at.jsonl", {"messages": [good], "at": "last week"})): (
            "at.jsonl line 1: at='last week' is not an ISO 8601"
        ),
        str(_jsonl(tmp_path / "blank.jsonl", [{"role": "user", "content": " "}])): (
            "blank.jsonl line 1: messages hold no text"
        ),
        # messages a line, then a conversation on line 3: line 3 is named, not line 1
        str(_jsonl(tmp_path / "mixed.jsonl", good, good, [good])): (
            "mixed.jsonl line 3: a file holds either one conversation"
        ),
        # a key import would drop: a misspelt thread id, time or speaker is named
        str(_jsonl(tmp_path / "thread.jsonl", {"messages": [good], "thread": "vpn"})): (
            "thread.jsonl line 1: the conversation has the key 'thread', which import does "
            "not read; did you mean 'thread_id'?"
        ),
        str(_jsonl(tmp_path / "when.jsonl", {"messages": [good], "when": "2026-01-05"})): (
            "when.jsonl line 1: the conversation has the key 'when'"
        ),
        str(_jsonl(tmp_path / "nmae.jsonl", good, {**good, "nmae": "Bob"})): (
            "nmae.jsonl line 2: message 1 has the key 'nmae', which import does not read; "
            "did you mean 'name'?"
        ),
        # a misspelt key that says what a line is: named, not read as the other kind
        str(_jsonl(tmp_path / "Role.jsonl", good, {"Role": "assistant", "content": "ok"})): (
            "Role.jsonl line 2 has the key 'Role', which import does not read; did you mean 'role'?"
        ),
        str(_jsonl(tmp_path / "Messages.jsonl", {"Messages": [good]})): (
            "Messages.jsonl line 1 has the key 'Messages'"
        ),
        str(_jsonl(tmp_path / "blocks.jsonl", {"role": "user", "content": [1, "hi"]})): (
            "blocks.jsonl line 1: message 0's content list holds a int value"
        ),
        str(
            _jsonl(
                tmp_path / "unread.jsonl",
                good,
                {"role": "user", "content": [{"type": "text", "text": {"annotations": []}}]},
            )
        ): "unread.jsonl line 2: message 1's content block 0 holds no text that can be read",
        str(_jsonl(tmp_path / "who.jsonl", {**good, "name": {"first": "Bob"}})): (
            "who.jsonl line 1: message 0's name must be text, not dict"
        ),
        # an empty thread id, refused by remember too: the file is refused, not renamed
        str(_jsonl(tmp_path / "nothread.jsonl", {"messages": [good], "thread_id": " "})): (
            "nothread.jsonl line 1: thread_id must not be empty"
        ),
    }
    future = _jsonl(tmp_path / "future.jsonl", {"messages": [good], "at": "2062-01-05"})
    cases[str(future)] = "future.jsonl line 1: at is in the future"
    deep = tmp_path / "deep.jsonl"  # Python's JSON reader recurses: named, not a bare error
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    cases[str(deep)] = "deep.jsonl line 1 nests lists or objects too deeply"
    twice = tmp_path / "twice.jsonl"  # JSON would keep the second content, dropping the first
    twice.write_text('{"role": "user", "content": "hi", "content": "there"}\n', encoding="utf-8")
    cases[str(twice)] = "twice.jsonl line 1: the key 'content' is given twice"
    long_key = str(_jsonl(tmp_path / "long.jsonl", {**good, "x" * 5000: 1}))
    cases[long_key] = "has the key 'xxxxx"
    for path, problem in cases.items():
        refused = runner.invoke(app, ["memory", "import", path, "--user", "ann", "-c", "notes"])
        assert len(refused.stderr) < 1000, refused.stderr[:200]
        assert refused.exit_code == 1 and problem in " ".join(refused.stderr.split()), (
            path,
            refused.stderr,
        )
    # the flags are named, not the Python parameters behind them
    ok = str(_jsonl(tmp_path / "ok.jsonl", good))
    for args, problem in (
        (["--user", " ann"], "--user=' ann'"),
        (["--user", "ann", "--thread", "t1 "], "--thread='t1 '"),
        (["--user", "ann", "--at", "yesterday"], "--at='yesterday'"),
        (["--user", ""], "--user must not be empty"),
        (["--user", "ann", "--thread", ""], "--thread must not be empty"),
    ):
        refused = runner.invoke(app, ["memory", "import", ok, *args, "-c", "notes"])
        assert refused.exit_code == 1 and problem in refused.stderr, refused.stderr
    refused = runner.invoke(app, ["memory", "search", "VPN", "--user", "ann ", "-c", "notes"])
    assert refused.exit_code == 1 and "--user='ann '" in refused.stderr
    refused = runner.invoke(app, ["memory", "forget", "ann", "--thread", " t", "-c", "notes"])
    assert refused.exit_code == 1 and "--thread=' t'" in refused.stderr
    refused = runner.invoke(app, ["memory", "forget", "ann", "--thread", "", "-c", "notes"])
    assert refused.exit_code == 1 and "--thread must not be empty" in refused.stderr
    refused = runner.invoke(app, ["memory", "forget", "ann", "--id", "", "-c", "notes"])
    assert refused.exit_code == 1 and "--id must not be empty; take one from `memory list`" in (
        refused.stderr
    )
    assert "nothing is remembered" in invoke(runner, "memory", "list", "ann", "-c", "notes").stdout
    # an OpenAI export's own keys are allowed, and the import then lists under --user too
    export = {"role": "assistant", "content": "Try reconnecting.", "refusal": None}
    openai = str(_jsonl(tmp_path / "openai.jsonl", good, export))
    assert invoke(runner, "memory", "import", openai, "--user", "ann", "-c", "notes").exit_code == 0
    listed = invoke(runner, "memory", "list", "--user", "ann", "-c", "notes").stdout
    assert "The VPN drops every hour." in listed
    for args, problem in (
        (["ann", "--user", "ann"], "give the user once"),
        ([], "missing the user"),
        ([""], "USER must not be empty"),
        (["--user", "  "], "--user must not be empty"),
    ):
        for command in ("list", "forget"):  # refused before forget asks anything
            refused = runner.invoke(app, ["memory", command, *args, "-c", "notes"], input="y\n")
            assert refused.exit_code == 1 and problem in refused.stderr, refused.stderr
            assert "Erase everything" not in refused.stdout
    erased = invoke(runner, "memory", "forget", "--user", "ann", "--yes", "-c", "notes")
    assert "erased" in erased.stdout
    assert "nothing is remembered" in invoke(runner, "memory", "list", "ann", "-c", "notes").stdout


def test_delete_refuses_an_empty_path_and_mirrors_folders_on_ingest(
    runner: CliRunner, notes: Path
) -> None:
    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    for bad in ("", "/"):
        refused = invoke(runner, "delete", bad)
        assert refused.exit_code == 1 and "error:" in refused.stderr
    listed = invoke(runner, "sources").stdout
    assert "errors.md" in listed and "snapshots.md" in listed  # nothing was deleted
    (notes / "errors.md").unlink()
    mirrored = invoke(runner, "ingest", str(notes))
    assert "removed (no longer in the folder)" in mirrored.stderr and "1 removed" in mirrored.stdout
    assert "errors.md" not in invoke(runner, "sources").stdout
    gone = invoke(runner, "delete", str(notes))
    assert gone.exit_code == 0 and "of 1 source(s)" in gone.stdout
    assert invoke(runner, "delete", str(notes)).exit_code == 1  # nothing left to delete


def test_delete_names_only_what_is_indexed(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    errors = notes / "errors.md"
    first = invoke(runner, "delete", str(errors))
    assert first.exit_code == 0 and "deleted 1 chunk(s) of 1 source(s)" in first.stdout
    again = invoke(runner, "delete", str(errors))  # still on disk, no longer indexed
    assert again.exit_code == 1 and "nothing indexed" in again.stderr, again.output
    # a file removed from disk is still found by the relative path the user typed
    monkeypatch.chdir(notes)
    (notes / "snapshots.md").unlink()
    gone = invoke(runner, "delete", "snapshots.md")
    assert gone.exit_code == 0 and "of 1 source(s)" in gone.stdout, gone.output
    assert invoke(runner, "sources").stdout == ""


def test_a_damaged_index_is_one_line_and_rebuild_recovers(runner: CliRunner, notes: Path) -> None:
    import os

    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    index = Path(os.environ["RAG_DATA_DIR"]) / "docs" / "index"
    for path in index.rglob("*"):
        if path.name == "status.dat":  # truncated: the engine panics reading it
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    broken = invoke(runner, "ask", "How often are snapshots taken?")
    assert broken.exit_code == 1 and "--rebuild" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) <= 3 and "Traceback" not in broken.stderr
    rebuilt = invoke(runner, "ingest", str(notes), "--rebuild")
    assert rebuilt.exit_code == 0 and "2 new" in rebuilt.stdout


def test_a_rebuild_that_fails_keeps_the_index_it_was_to_replace(
    runner: CliRunner, notes: Path
) -> None:
    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    (notes / "blob.txt").write_bytes(b"abc\x00\x01\x02")  # refused: binary
    failed = invoke(runner, "ingest", str(notes), "--rebuild")
    assert failed.exit_code == 1 and "the previous index is back" in failed.stderr
    assert "errors.md" in invoke(runner, "sources").stdout
    answered = invoke(runner, "ask", "What does LF-409 mean?")
    assert answered.exit_code == 0 and "locked by another process" in answered.stdout


def test_a_rebuild_stopped_by_sigterm_puts_the_old_index_back(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``docker stop`` sends SIGTERM: it stops an ingest as Ctrl-C does."""
    import os
    import signal

    from retrievalagent.embeddings import MiniLMEmbeddings

    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    (notes / "new.md").write_text("# New\n\nThe ferry leaves at noon.\n")

    def stopped(self: Any, texts: list[str]) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the ingest")

    real = MiniLMEmbeddings.embed_documents, MiniLMEmbeddings.embed_array
    monkeypatch.setattr(MiniLMEmbeddings, "embed_documents", stopped)
    monkeypatch.setattr(MiniLMEmbeddings, "embed_array", stopped)
    result = runner.invoke(app, ["ingest", str(notes), "--rebuild"])
    assert result.exit_code == 130 and "the previous index is back" in result.stderr
    monkeypatch.setattr(MiniLMEmbeddings, "embed_documents", real[0])
    monkeypatch.setattr(MiniLMEmbeddings, "embed_array", real[1])
    assert "errors.md" in invoke(runner, "sources").stdout
    assert signal.getsignal(signal.SIGTERM) is not None  # restored, not left on the handler
    data = Path(os.environ["RAG_DATA_DIR"]) / "docs"
    assert not list(data.glob("index.replaced-*"))


def test_a_rebuild_leaves_an_index_another_agent_has_open(runner: CliRunner, notes: Path) -> None:
    from retrievalagent import init_agent

    assert invoke(runner, "ingest", str(notes)).exit_code == 0
    with init_agent("docs") as serving:  # a server answering from it
        refused = invoke(runner, "ingest", str(notes), "--rebuild")
        assert refused.exit_code == 1 and "is open in this process" in refused.stderr
        assert serving.count() > 0
    assert "errors.md" in invoke(runner, "sources").stdout


def test_ingesting_a_missing_path_creates_no_collection(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    import os

    missing = tmp_path / "nope"
    failed = invoke(runner, "ingest", str(notes), str(missing), "-c", "ghost")
    assert failed.exit_code == 1
    assert f"error: cannot ingest {missing}: no such file or folder" in failed.stderr
    assert not (Path(os.environ["RAG_DATA_DIR"]) / "ghost").exists()
    asked = invoke(runner, "ask", "hello?", "-c", "ghost")
    assert asked.exit_code == 1 and "collection 'ghost' does not exist" in asked.stderr
    # a file that is there but cannot be read creates nothing either
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04 not read")
    (tmp_path / "gone.md").symlink_to(tmp_path / "nowhere.md")
    for unusable, problem in (
        ("report.docx", "unsupported file type .docx"),
        ("gone.md", "broken symlink"),
    ):
        failed = invoke(runner, "ingest", str(tmp_path / unusable), "-c", "ghost")
        assert failed.exit_code == 1 and problem in failed.stderr, failed.stderr
    assert not (Path(os.environ["RAG_DATA_DIR"]) / "ghost").exists()


def test_a_data_dir_that_is_a_file_is_a_short_error_without_rebuild_advice(
    runner: CliRunner, notes: Path, tmp_path: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("precious\n")
    result = invoke(runner, "ingest", str(notes), "--data-dir", str(afile))
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: cannot open the index at {afile / 'docs' / 'index'}: ")
    assert "not a folder" in first and f"data dir {afile} (--data-dir" in first
    assert "--rebuild" not in result.stderr and "delete" not in result.stderr
    assert afile.read_text() == "precious\n"


def test_an_unreachable_qdrant_server_is_a_short_error(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrievalagent import VectorIndexError

    monkeypatch.setenv("RAG_BACKEND_URL", "http://127.0.0.1:1")
    result = invoke(runner, "ask", "anything?")
    assert result.exit_code == 1
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) < 5
    assert result.stderr.startswith("error: cannot reach Qdrant at http://127.0.0.1:1")

    with pytest.raises(VectorIndexError) as raised:  # --debug: the library's own traceback
        invoke(runner, "--debug", "ask", "anything?")
    error = raised.value
    assert error.__cause__ is None and error.__suppress_context__  # no chained tracebacks
    assert error.original is not None and "refused" in str(error.original).lower()


@pytest.mark.parametrize("argument", ["model", "embeddings"])
def test_a_missing_api_key_is_one_config_error_without_a_chain(
    argument: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_openai")
    from retrievalagent import ConfigError, init_agent

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    spec = {"model": "openai:gpt-4o-mini", "embeddings": "openai:text-embedding-3-small"}
    with pytest.raises(ConfigError, match=r"could not be created: .*OPENAI_API_KEY") as raised:
        init_agent(
            "keyless", backend_url=":memory:", data_dir=tmp_path, **{argument: spec[argument]}
        )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert raised.value.original is not None


def _commands(command: Any, path: tuple[str, ...] = ()) -> Any:
    """Every command under ``command`` with the arguments that reach it."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():  # a group's subcommands
        yield from _commands(sub, (*path, name))


def test_help_shows_bracketed_text_as_written(runner: CliRunner) -> None:
    import typer.main

    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        output = invoke(runner, *path, "--help").stdout
        shown = " ".join(re.sub("[\u2500-\u257f]", " ", output).split())  # no box lines
        texts = [p.help for p in command.params if getattr(p, "help", None)]
        for text in [command.help or "", *texts]:
            if any(c in text for c in "[]{}"):
                checked += 1
                assert " ".join(text.split()) in shown, (path, text)
    assert checked >= 2  # eval's --questions and --run-out at least


def test_chat_reports_a_bad_line_and_keeps_the_session(notes: Path, runner: CliRunner) -> None:
    """Piped into a real process, as a user would: a line with no words, a lone "?" and a
    paste over the length limit are each one error line; the next question is answered."""
    import os
    import subprocess
    import sys

    assert invoke(runner, "ingest", str(notes), "-c", "talk").exit_code == 0
    lines = ["!!!", "What does LF-409 mean?", "?", "vault " * 20, "How long is a snapshot kept?"]
    run = subprocess.run(
        [sys.executable, "-m", "retrievalagent", "chat", "-c", "talk"],
        input="\n".join(lines) + "\n",
        env={**os.environ, "RAG_MAX_QUESTION_CHARS": "60", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "question '!!!' has no letters or digits" in run.stderr
    assert "question '?' has no letters or digits" in run.stderr
    assert "the limit is 60" in run.stderr and "RAG_MAX_QUESTION_CHARS" in run.stderr
    assert "--debug" not in run.stderr  # a turn's error, not the command's
    assert "locked by another process" in run.stdout
    assert "thirty days" in run.stdout


def test_a_padded_user_is_refused_by_the_flag_or_argument_that_gave_it(
    runner: CliRunner, notes: Path
) -> None:
    """The id "  alice  " is not alice: the CLI names the flag or argument that holds it."""
    assert invoke(runner, "ingest", str(notes), "-c", "ids").exit_code == 0
    asked = invoke(runner, "ask", "What does LF-409 mean?", "-c", "ids", "--user", " alice ")
    assert asked.exit_code == 1
    assert "--user=' alice ' is invalid: it starts or ends with whitespace" in asked.stderr
    for command in (["list"], ["forget", "--yes"]):
        result = invoke(runner, "memory", *command, "alice ", "-c", "ids")
        assert result.exit_code == 1, result.output
        assert "USER='alice ' is invalid: it starts or ends with whitespace" in result.stderr


def test_memory_import_stopped_by_ctrl_c_says_what_to_do_and_a_rerun_finishes_it(
    runner: CliRunner, notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C halfway through an import: a clear line, exit 130, what was written stays, and
    running the same command again stores the rest once, nothing twice."""
    from retrievalagent.embeddings import MiniLMEmbeddings

    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    n = 40
    history = _jsonl(
        tmp_path / "history.jsonl",
        *(
            {
                "messages": [
                    {"role": "user", "content": f"Ticket {i}: the backup job {i} failed."}
                ],
                "thread_id": f"t{i}",
                "at": "2026-01-05T10:00:00Z",
            }
            for i in range(n)
        ),
    )
    real = MiniLMEmbeddings.embed_array
    calls = 0

    def ctrl_c_halfway(self: MiniLMEmbeddings, texts: list[str]) -> Any:
        nonlocal calls
        calls += 1
        if calls == n // 2:  # the default store (mem0) embeds one text a call
            raise KeyboardInterrupt
        return real(self, texts)

    def memory(*args: str) -> Any:
        return runner.invoke(app, ["memory", *args, "-c", "notes"], catch_exceptions=False)

    with monkeypatch.context() as patch:
        patch.setattr(MiniLMEmbeddings, "embed_array", ctrl_c_halfway)
        stopped = memory("import", str(history), "--user", "ann")
    assert calls == n // 2, stopped.output
    assert stopped.exit_code == 130
    assert "interrupted: what was written before it stays remembered" in stopped.stderr
    assert "run the same command again" in stopped.stderr
    kept = json.loads(memory("list", "ann", "--json").stdout)
    assert 0 < len(kept) < n
    rest = memory("import", str(history), "--user", "ann")
    assert rest.exit_code == 0, rest.output
    assert f"imported {n} conversation(s) of 'ann': {n - len(kept)} new memories" in rest.stdout
    listed = json.loads(memory("list", "ann", "--json").stdout)
    texts = sorted(m["text"] for m in listed)
    assert len(texts) == n and len(set(texts)) == n  # every conversation once


def test_memory_import_stopped_by_ctrl_c_before_it_writes_says_nothing_was_imported(
    runner: CliRunner, notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the file is read or the model loads: exit 130 and a line saying
    nothing was imported (before, the import stopped without a word)."""
    from retrievalagent.cli import _memory

    assert invoke(runner, "ingest", str(notes), "-c", "notes").exit_code == 0
    history = _jsonl(tmp_path / "h.jsonl", {"messages": [{"role": "user", "content": "Hi."}]})

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    for step in ("read_conversations", "_memory_agent"):
        with monkeypatch.context() as patch:
            patch.setattr(_memory, step, ctrl_c)
            stopped = runner.invoke(
                app, ["memory", "import", str(history), "--user", "ann", "-c", "notes"]
            )
        assert stopped.exit_code == 130, (step, stopped.output)
        assert "interrupted before anything was stored: nothing was imported" in stopped.stderr
    listed = runner.invoke(app, ["memory", "list", "ann", "--json", "-c", "notes"])
    assert json.loads(listed.stdout) == []


@pytest.mark.parametrize("when", ["reading", "summing_up"])
def test_ingest_stopped_by_ctrl_c_before_or_after_the_writes_says_what_was_finished(
    runner: CliRunner, notes: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Ctrl-C while the files are still read, or once every one is written (the summary,
    the closing): exit 130 and a line saying what was finished, never a silent stop."""
    import retrievalagent.agent as agent_module
    from retrievalagent import RetrievalAgent

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        if when == "reading":
            patch.setattr(agent_module, "read_inputs", ctrl_c)
        else:
            patch.setattr(RetrievalAgent, "count", ctrl_c)
        stopped = runner.invoke(app, ["ingest", str(notes), "-c", "notes"])
    assert stopped.exit_code == 130
    said = " ".join(stopped.stderr.split())
    if when == "reading":
        assert "interrupted: no source finished (the inputs were still being read)" in said
    else:
        assert "interrupted after the ingest finished: 2 source(s)" in said
    again = invoke(runner, "ingest", str(notes), "-c", "notes")
    assert again.exit_code == 0
    assert "holds 2 chunks" in again.stdout
