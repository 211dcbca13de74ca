"""``hermes-store``: the real command line, in a subprocess, on real files under tmp_path.

The console script is not installed during development, so each test runs
``python -m hermes_store.cli`` with the repository on ``PYTHONPATH`` and
``HERMES_HOME`` pointing into tmp_path. Fixtures are written with the library
(fast, in process); the CLI is what is under test. Most assertions read
``--json`` output or look at the store afterwards with ``SessionDB``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.paths import REPO

pytestmark = pytest.mark.sqlite_only(
    "the command line on state.db files; on a PostgreSQL URL: test_pg_cli.py and test_copy.py"
)

OLD = 1_700_000_000.0  # Nov 2023: far older than any --older-than used below

Run = Callable[..., subprocess.CompletedProcess[str]]


class Clock:
    """Strictly increasing time that a test sets by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "hermes-home"


@pytest.fixture
def cli(tmp_path: Path, home: Path) -> Run:
    """Run the CLI; ``env`` adds or (with None) removes environment variables."""

    def run(
        *args: str, env: dict[str, str | None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        environment = dict(os.environ)
        for inherited in ("HERMES_STORE_URL", "FORCE_COLOR"):
            environment.pop(inherited, None)
        environment.update(
            HERMES_HOME=str(home),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            NO_COLOR="1",
            COLUMNS="200",
        )
        for key, value in (env or {}).items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        return subprocess.run(
            [sys.executable, "-m", "hermes_store.cli", *args],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result).stdout)


def one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 1 with exactly one line on stderr, no traceback, naming every needle."""
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def seed(path: Path) -> None:
    """root -> child -> grandchild (a compressed lineage), other (discord), recent (today)."""
    clock = Clock(OLD)
    with SessionDB(path, clock=clock) as db:
        db.create_session("root", "cli", model="model-a", system_prompt="be brief")
        turn = [
            {"role": "user", "content": "My docker build fails [bold]loudly[/bold]"},
            {
                "role": "assistant",
                "content": "Let me check the disk with chat-send.",
                "tool_calls": [{"id": "call_1", "function": {"name": "terminal"}}],
                "reasoning": "disk first",
                "reasoning_details": [{"type": "summary", "text": "disk"}],
                "token_count": 42,
                "finish_reason": "tool_calls",
            },
            {
                "role": "tool",
                "content": "/var/lib/docker is 98% full",
                "tool_call_id": "call_1",
                "tool_name": "terminal",
            },
        ]
        for message in turn:  # one by one: the fixture need not depend on batch appends
            db.append_message("root", **message)
        db.update_token_counts(
            "root", input_tokens=1000, output_tokens=500, estimated_cost_usd=0.25
        )
        db.set_session_title("root", "Fix Docker Build")
        db.end_session("root", "compressed")
        db.create_session("child", "cli", model="model-a", parent_session_id="root")
        db.append_message("child", "user", "docker works after the prune")
        db.set_session_title("child", "Fix Docker Build #2")
        db.update_token_counts("child", input_tokens=10, output_tokens=5)
        db.create_session("grandchild", "telegram", model="model-b", parent_session_id="child")
        db.append_message("grandchild", "user", "thanks from telegram")
        db.create_session("other", "discord")
        db.append_message("other", "user", "docker on discord")
        db.end_session("other", "done")
        clock.now = time.time()
        db.create_session("recent", "cli")
        db.append_message("recent", "assistant", "a fresh answer")
        db.end_session("recent", "user_exit")


@pytest.fixture
def store(db_path: Path) -> Path:
    seed(db_path)
    return db_path


def counts(path: Path) -> tuple[int, int]:
    with SessionDB(path) as db:
        return db.session_count(), db.message_count()


# ----------------------------------------------------------------------
# schema
# ----------------------------------------------------------------------
def test_help_lists_every_command(cli: Run) -> None:
    out = ok(cli("--help")).stdout
    commands = "upgrade current sessions show lineage search stats export import prune delete"
    for command in [*commands.split(), "title", "check", "demo", "archive", "pin"]:
        assert command in out


def test_upgrade_creates_a_private_store_at_head_and_current_reports_it(
    cli: Run, tmp_path: Path
) -> None:
    from hermes_store.schema.migrate import HEAD_REVISION, HEAD_SCHEMA_VERSION

    path = tmp_path / "new" / "state.db"
    assert "created" in ok(cli("upgrade", "--db", str(path))).stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    state = as_json(cli("current", "--db", str(path), "--json"))
    assert state == {
        "schema_version": HEAD_SCHEMA_VERSION,
        "alembic_revision": HEAD_REVISION,
        "head_revision": HEAD_REVISION,
        "at_head": True,
        "ladder": "hermes_store",
        "layout": "hermes_store's own (document v6 + trigram and CJK pair indexes, kept totals)",
    }
    assert "already at head" in ok(cli("upgrade", "--db", str(path))).stdout


def test_upgrade_adopts_a_file_of_the_old_code(cli: Run, tmp_path: Path) -> None:
    from hermes_store.schema.migrate import HEAD_REVISION
    from tests.support.legacy_schema import SESSIONS, build_legacy_db

    path = tmp_path / "legacy.db"
    build_legacy_db(path, 3)
    current = ok(cli("current", "--db", str(path))).stdout
    assert "schema version:   3" in current and "alembic revision: none" in current
    upgraded = ok(cli("upgrade", "--db", str(path))).stdout
    assert "upgraded" in upgraded and "schema version 3" in upgraded and HEAD_REVISION in upgraded
    with SessionDB(path) as db:
        assert db.session_count() == len(SESSIONS)
        assert db.get_session("sess_grandchild")["parent_session_id"] == "sess_child"
        assert db.get_session("sess_root")["title"] == "Fix Docker Build"
        assert [h["session_id"] for h in db.search_messages("kubernetes")] == ["sess_child"]


def test_default_store_is_hermes_home_then_hermes_store_url(
    cli: Run, home: Path, tmp_path: Path
) -> None:
    ok(cli("upgrade"))
    assert (home / "state.db").is_file()
    ok(cli("sessions"))
    elsewhere = tmp_path / "elsewhere.db"
    ok(cli("upgrade", env={"HERMES_STORE_URL": f"sqlite:///{elsewhere}"}))
    assert elsewhere.is_file()


# ----------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------
def test_sessions_lists_conversations_newest_first_with_filters(cli: Run, store: Path) -> None:
    rows = as_json(cli("sessions", "--db", str(store), "--json"))
    assert [r["id"] for r in rows] == ["recent", "other", "root"]  # children hidden
    assert rows[2]["preview"] == "My docker build fails [bold]loudly[/bold]"
    assert rows[2]["message_count"] == 3 and "last_active" in rows[0]
    every = as_json(cli("sessions", "--db", str(store), "--json", "--include-children"))
    assert [r["id"] for r in every] == ["recent", "other", "grandchild", "child", "root"]
    table = ok(cli("sessions", "--db", str(store), "--source", "cli", "--offset", "1")).stdout
    for text in ("last active", "Fix Docker Build", "model-a", "My docker build fails"):
        assert text in table
    assert "recent" not in table and "discord" not in table
    kept = as_json(cli("sessions", "--db", str(store), "--json", "--exclude-source", "cli"))
    assert [r["id"] for r in kept] == ["other"]


def test_sessions_lists_a_compressed_conversation_under_its_tip(cli: Run, db_path: Path) -> None:
    with SessionDB(db_path, clock=Clock(OLD)) as db:
        db.create_session("first", "cli")
        db.append_message("first", "user", "where it began")
        db.end_session("first", "compression")
        db.create_session("tip", "cli", parent_session_id="first")
        db.append_message("tip", "user", "where it is now")
    (row,) = as_json(cli("sessions", "--db", str(db_path), "--json"))
    assert (row["id"], row["_lineage_root_id"], row["preview"]) == (
        "tip",
        "first",
        "where it is now",
    )
    (raw,) = as_json(cli("sessions", "--db", str(db_path), "--json", "--no-tips"))
    assert (raw["id"], raw["preview"]) == ("first", "where it began")
    table = ok(cli("sessions", "--db", str(db_path))).stdout
    assert "tip" in table and "where it is now" in table and "where it began" not in table


def test_show_prints_a_session_and_its_messages(cli: Run, store: Path) -> None:
    session = as_json(cli("show", "root", "--db", str(store), "--json"))
    assert session["title"] == "Fix Docker Build" and session["input_tokens"] == 1000
    assert [m["role"] for m in session["messages"]] == ["user", "assistant", "tool"]
    assistant = session["messages"][1]
    assert assistant["tool_calls"] == [{"id": "call_1", "function": {"name": "terminal"}}]
    assert assistant["reasoning_details"] == [{"type": "summary", "text": "disk"}]
    text = ok(cli("show", "root", "--db", str(store))).stdout
    assert "[bold]loudly[/bold]" in text, "message content is shown as text, not as markup"
    assert "Fix Docker Build" in text and "call_1" in text and "98% full" in text


def test_lineage_shows_ancestors_and_descendants(cli: Run, store: Path) -> None:
    tree = as_json(cli("lineage", "child", "--db", str(store), "--json"))
    assert tree["session"]["id"] == "child"
    assert [r["id"] for r in tree["ancestors"]] == ["root"]
    assert [r["id"] for r in tree["descendants"]] == ["grandchild"]
    text = ok(cli("lineage", "grandchild", "--db", str(store))).stdout
    lines = [line for line in text.splitlines() if line.strip()]
    assert [next(w for w in ("grandchild", "child", "root") if w in line) for line in lines] == [
        "root",
        "child",
        "grandchild",
    ]
    assert "──" in lines[1], "a rich tree, root at the top"


def test_search_filters_by_source(cli: Run, store: Path) -> None:
    everywhere = as_json(cli("search", "docker", "--db", str(store), "--json"))
    assert sorted(hit["session_id"] for hit in everywhere) == ["child", "other", "root", "root"]
    assert all(">>>docker<<<" in hit["snippet"].lower() for hit in everywhere)
    picked = as_json(
        cli(
            "search",
            "docker",
            "--source",
            "discord",
            "--source",
            "telegram",
            "--db",
            str(store),
            "--json",
        )
    )
    assert [hit["session_id"] for hit in picked] == ["other"]


def test_search_excludes_sources_filters_roles_and_pages(cli: Run, store: Path) -> None:
    args = ["--exclude-source", "discord", "--role", "user", "--role", "tool", "--json"]
    hits = as_json(cli("search", "docker", "--db", str(store), *args))
    assert sorted((hit["session_id"], hit["role"]) for hit in hits) == [
        ("child", "user"),
        ("root", "tool"),
        ("root", "user"),
    ]
    page = as_json(
        cli("search", "docker", "--db", str(store), *args, "--limit", "2", "--offset", "2")
    )
    assert [hit["id"] for hit in page] == [hits[2]["id"]]


def test_search_table_turns_markers_into_highlighting(cli: Run, store: Path) -> None:
    plain = ok(cli("search", "chat-send", "--db", str(store))).stdout
    assert "chat-send" in plain and "root" in plain and ">>>" not in plain
    colored = ok(
        cli("search", "discord", "--db", str(store), env={"NO_COLOR": None, "FORCE_COLOR": "1"})
    ).stdout
    assert "\x1b[" in colored and ">>>" not in colored and "<<<" not in colored


def test_stats_reports_tokens_by_model_and_top_sessions(cli: Run, store: Path) -> None:
    report = as_json(cli("stats", "--db", str(store), "--json", "--top", "2"))
    assert (report["sessions"], report["messages"]) == (5, 7)
    by_model = {row["model"]: row for row in report["by_model"]}
    assert by_model["model-a"]["session_count"] == 2
    assert by_model["model-a"]["total_input"] == 1010
    assert by_model["model-a"]["total_cost"] == pytest.approx(0.25)
    assert [row["id"] for row in report["top_sessions"]] == ["root", "child"]
    text = ok(cli("stats", "--db", str(store))).stdout
    assert "tokens and cost by model" in text and "$0.2500" in text and "1,500" in text


LONG_IDS = (
    "20260105_142233_a1b2c3d4e5f6",  # the agent's own: started-at stamp and a random tail
    "0e2b9c2e-5d6f-4c7a-9a43-1f2d3e4c5b6a",  # a UUID
    "demo-1796405092609-8007-delegate-2",  # the demo's, with a continuation's suffix
)


@pytest.mark.parametrize("width", [80, 120])
def test_tables_never_wrap_a_session_id_and_top_sessions_used_tokens(
    cli: Run, db_path: Path, width: int
) -> None:
    """An id is what people copy out of a table: it stays whole on one line, at any width."""
    with SessionDB(db_path, clock=Clock(OLD)) as db:
        for n, session_id in enumerate(LONG_IDS):
            db.create_session(session_id, "cli", model="anthropic/claude-sonnet-4.6")
            db.set_session_title(session_id, f"a long title about the docker build, part {n}")
            db.append_message(session_id, "user", "my docker build fails with no space left " * 3)
            db.update_token_counts(session_id, 1000 * (n + 1), 10, estimated_cost_usd=0.5)
            db.end_session(session_id, "user_exit")
        db.create_session("idle-session-that-used-no-tokens", "cli")
        db.append_message("idle-session-that-used-no-tokens", "user", "docker?")
    store = str(db_path)
    columns = {"COLUMNS": str(width)}
    outputs = {
        "sessions": ok(cli("sessions", "--db", store, env=columns)).stdout,
        "search": ok(cli("search", "docker", "--db", store, env=columns)).stdout,
        "stats": ok(cli("stats", "--db", store, env=columns)).stdout,
        "prune": ok(
            cli("prune", "--older-than", "1", "--dry-run", "--db", store, env=columns)
        ).stdout,
    }
    for command, text in outputs.items():
        assert max(len(line) for line in text.splitlines()) <= width, (command, text)
        cells = {cell.strip() for line in text.splitlines() for cell in line.split("│")}
        for session_id in LONG_IDS:
            assert session_id in cells, f"{command} at {width} columns cut {session_id}:\n{text}"
    top = outputs["stats"].split("by tokens", 1)[1]
    assert "idle-session" not in top and "top 3 session(s)" in outputs["stats"]
    report = as_json(cli("stats", "--db", store, "--json"))
    assert [row["id"] for row in report["top_sessions"]] == list(reversed(LONG_IDS))


# ----------------------------------------------------------------------
# export / import
# ----------------------------------------------------------------------
def test_export_import_round_trip_into_a_fresh_file(cli: Run, store: Path, tmp_path: Path) -> None:
    dump, fresh = tmp_path / "all.jsonl", tmp_path / "fresh.db"
    ok(cli("export", "--db", str(store), "--out", str(dump)))
    assert stat.S_IMODE(dump.stat().st_mode) == 0o600, "an export holds whole conversations"
    records = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(records) == 5 and sum(len(r["messages"]) for r in records) == 7

    imported = ok(cli("import", str(dump), "--db", str(fresh))).stdout
    assert "imported 5 session(s), 7 message(s)" in imported
    assert counts(fresh) == counts(store) == (5, 7)
    with SessionDB(store) as old, SessionDB(fresh) as new:
        assert list(new.iter_export()) == records, "every column and message field, ids included"
        for session_id in ("root", "child", "grandchild", "other", "recent"):
            assert new.get_messages(session_id) == old.get_messages(session_id)
        assert new.get_ancestors("grandchild") == old.get_ancestors("grandchild")
        assert [hit["session_id"] for hit in new.search_messages("chat-send")] == ["root"]


def test_export_import_keeps_archived_and_pinned(cli: Run, store: Path, tmp_path: Path) -> None:
    """The flags travel with their sessions: each row as exported, not its chain's rule."""
    dump, fresh = tmp_path / "all.jsonl", tmp_path / "fresh.db"
    with SessionDB(store) as db:
        db.set_session_archived("other", True)
        db.set_session_pinned("recent", True)
        exported = {r["id"]: (r["archived"], r["pinned"]) for r in db.iter_export()}
    ok(cli("export", "--db", str(store), "--out", str(dump)))
    ok(cli("import", str(dump), "--db", str(fresh)))
    with SessionDB(fresh) as db:
        imported = {r["id"]: (r["archived"], r["pinned"]) for r in db.iter_export()}
        assert [row["id"] for row in db.list_sessions_rich(include_archived=True)] != []
        assert "other" not in {row["id"] for row in db.list_sessions_rich(limit=50)}
    assert imported == exported and exported["other"] == (1, 0) and exported["recent"] == (0, 1)

    bad = tmp_path / "bad.jsonl"
    record = json.loads(dump.read_text().splitlines()[0])
    bad.write_text(json.dumps({**record, "id": "flagged", "title": None, "archived": 2}) + "\n")
    refused = cli("import", str(bad), "--db", str(fresh))
    assert refused.returncode != 0 and "archived must be 0 or 1" in refused.stderr
    assert "Traceback" not in refused.stderr
    with SessionDB(fresh) as db:
        assert db.get_session("flagged") is None


def test_import_twice_skips_present_sessions_without_duplicating_messages(
    cli: Run, store: Path, tmp_path: Path
) -> None:
    dump, target = tmp_path / "all.jsonl", tmp_path / "target.db"
    with SessionDB(store) as db:
        dump.write_text("".join(json.dumps(record) + "\n" for record in db.iter_export()))
    ok(cli("import", str(dump), "--db", str(target)))
    again = ok(cli("import", str(dump), "--db", str(target))).stdout
    assert "imported 0 session(s), 0 message(s)" in again and "skipped 5" in again
    assert counts(target) == (5, 7)
    with SessionDB(target) as db:
        assert db.get_session("root")["message_count"] == 3
        assert len(db.search_messages("docker")) == 4


def test_export_one_session_or_one_source_to_stdout(cli: Run, store: Path) -> None:
    one = ok(cli("export", "root", "--db", str(store)))
    (record,) = [json.loads(line) for line in one.stdout.splitlines()]
    assert record["id"] == "root" and len(record["messages"]) == 3
    assert "exported 1 session(s)" in one.stderr
    cli_only = ok(cli("export", "--source", "cli", "--db", str(store))).stdout.splitlines()
    assert sorted(json.loads(line)["id"] for line in cli_only) == ["child", "recent", "root"]


def test_export_onto_a_pipe_or_device_leaves_it_in_place(
    cli: Run, store: Path, tmp_path: Path
) -> None:
    """``--out`` naming a FIFO (or, as root, ``/dev/null``) must not be renamed over by a file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_error_line(
        cli("export", "--db", str(store), "--out", str(fifo)), str(fifo), "not a regular file"
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the pipe is still a pipe"
    link = tmp_path / "to-pipe.jsonl"
    link.symlink_to(fifo)
    one_error_line(cli("export", "--db", str(store), "--out", str(link)), "not a regular file")
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file left behind"


def test_stored_control_characters_reach_the_terminal_inert(cli: Run, tmp_path: Path) -> None:
    """ESC and OSC sequences in ids, content, tool output and models are shown, not obeyed."""
    path, sid = tmp_path / "escapes.db", "s\x1b[31mX"
    with SessionDB(path) as db:
        db.create_session(sid, "cli", model="m\x1b]0;retitled\x07")
        db.create_session("kid", "cli", parent_session_id=sid)
        db.append_message(sid, "user", "clear\x1b[2J screen\rforged\x9b line")
        db.append_message(
            sid, "assistant", None, tool_calls=[{"id": "c\x1b[8m", "function": {"name": "t"}}]
        )
        db.append_message(sid, "tool", "out\x1b[1A", tool_call_id="c\x1b[8m", tool_name="t\x07")
    runs = [
        ("sessions", "--db", str(path)),
        ("search", "screen", "--db", str(path)),
        ("show", sid, "--db", str(path)),
        ("lineage", "kid", "--db", str(path)),
        ("stats", "--db", str(path)),
    ]
    for args in runs:
        out = ok(cli(*args)).stdout  # NO_COLOR: any ESC in the output came from the store
        for control in ("\x1b", "\x07", "\r", "\x9b"):
            assert control not in out, (args[0], control, out)
        assert "\u241b" in out, (args[0], out)  # ESC shown as its symbol
    shown = ok(cli("show", sid, "--db", str(path))).stdout
    assert "clear\u241b[2J screen\u240dforged\ufffd line" in shown


def test_import_counts_the_messages_it_writes_not_the_counters_a_line_claims(
    cli: Run, tmp_path: Path
) -> None:
    """A hand-edited export: counters from its messages, so 'check' finds the store healthy."""
    dump, target = tmp_path / "edited.jsonl", tmp_path / "edited.db"
    line = {
        "id": "edited",
        "source": "cli",
        "started_at": 1.0,
        "message_count": 5,
        "tool_call_count": 99,
        "messages": [
            {"role": "user", "content": "hi", "timestamp": 2.0},
            {"role": "assistant", "timestamp": 3.0, "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "assistant", "timestamp": 4.0, "tool_calls": "{not json"},
        ],
    }
    bare = {"id": "bare", "source": "cli", "started_at": 1.0}
    bare_messages = [{"role": "user", "content": "no counters", "timestamp": 2.0}]
    dump.write_text(json.dumps(line) + "\n" + json.dumps({**bare, "messages": bare_messages}))
    ok(cli("import", str(dump), "--db", str(target)))
    with SessionDB(target) as db:
        edited, plain = db.get_session("edited"), db.get_session("bare")
    assert (edited["message_count"], edited["tool_call_count"]) == (3, 3)
    assert (plain["message_count"], plain["tool_call_count"]) == (1, 0)
    ok(cli("check", "--db", str(target)))


def test_import_links_children_whose_parent_comes_later_in_the_file(
    cli: Run, tmp_path: Path
) -> None:
    dump, target = tmp_path / "family.jsonl", tmp_path / "family.db"
    lines = [
        {"id": "kid", "source": "cli", "started_at": 2.0, "parent_session_id": "mum"},
        {
            "id": "mum",
            "source": "cli",
            "started_at": 1.0,
            "title": "Mum",
            "messages": [{"role": "user", "content": "hello mum", "timestamp": 1.5}],
        },
    ]
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ok(cli("import", str(dump), "--db", str(target)))
    with SessionDB(target) as db:
        assert db.get_session("kid")["parent_session_id"] == "mum"
        assert db.get_session("kid")["message_count"] == 0
        assert [m["content"] for m in db.get_messages("mum")] == ["hello mum"]


def test_import_into_a_store_with_the_same_title_keeps_the_other_session(
    cli: Run, store: Path, tmp_path: Path
) -> None:
    dump = tmp_path / "clash.jsonl"
    dump.write_text(
        json.dumps(
            {"id": "newcomer", "source": "cli", "started_at": 3.0, "title": "Fix Docker Build"}
        )
        + "\n"
    )
    result = ok(cli("import", str(dump), "--db", str(store)))
    assert "already belongs to session root" in result.stderr
    with SessionDB(store) as db:
        assert db.get_session("newcomer")["title"] is None
        assert db.get_session("root")["title"] == "Fix Docker Build"


@pytest.mark.parametrize(
    ("second_line", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"id": "x", "source": "cli"}', "started_at is required"),
        (
            '{"id": "x", "source": "cli", "started_at": 1, "messages": [{"role": "user"}]}',
            "timestamp",
        ),
    ],
)
def test_a_bad_jsonl_line_is_named_and_nothing_is_written(
    cli: Run, tmp_path: Path, second_line: str, needle: str
) -> None:
    dump, target = tmp_path / "bad.jsonl", tmp_path / "target.db"
    dump.write_text('{"id": "fine", "source": "cli", "started_at": 1}\n' + second_line + "\n")
    one_error_line(cli("import", str(dump), "--db", str(target)), "line 2", needle)
    assert not target.exists(), "a file that does not import leaves no store behind"


# ----------------------------------------------------------------------
# cleanup
# ----------------------------------------------------------------------
def test_prune_dry_run_lists_and_deletes_nothing(cli: Run, store: Path) -> None:
    would = as_json(cli("prune", "--older-than", "30", "--dry-run", "--db", str(store), "--json"))
    assert would["dry_run"] is True
    assert sorted(row["id"] for row in would["sessions"]) == ["other", "root"]
    assert counts(store) == (5, 7)
    text = ok(cli("prune", "--older-than", "30", "--dry-run", "--db", str(store))).stdout
    assert "would prune 2" in text and "Fix Docker Build" in text
    assert counts(store) == (5, 7)


def test_prune_deletes_old_ended_sessions_and_orphans_children(cli: Run, store: Path) -> None:
    assert (
        "pruned 1"
        in ok(cli("prune", "--older-than", "30", "--source", "discord", "--db", str(store))).stdout
    )
    ok(cli("prune", "--older-than", "30", "--db", str(store)))
    with SessionDB(store) as db:
        assert [s["id"] for s in db.search_sessions()] == ["recent", "grandchild", "child"]
        assert db.get_session("child")["parent_session_id"] is None


def test_delete_and_title(cli: Run, store: Path) -> None:
    ok(cli("title", "child", "  Docker\tfollow-up  ", "--db", str(store)))
    assert "deleted session other" in ok(cli("delete", "other", "--db", str(store))).stdout
    with SessionDB(store) as db:
        assert db.get_session_title("child") == "Docker follow-up"
        assert db.get_session("other") is None and db.message_count() == 6


def test_duplicate_or_overlong_title_is_one_red_line(cli: Run, store: Path) -> None:
    one_error_line(
        cli("title", "child", "Fix Docker Build", "--db", str(store)), "already in use", "root"
    )
    one_error_line(cli("title", "child", "x" * 101, "--db", str(store)), "too long")
    assert ok(cli("title", "child", "--db", str(store))).stdout.strip() == "Fix Docker Build #2"


# ----------------------------------------------------------------------
# health, demo
# ----------------------------------------------------------------------
def test_check_finds_and_repairs_miscounted_sessions(cli: Run, store: Path) -> None:
    raw = sqlite3.connect(store)
    raw.execute("UPDATE sessions SET message_count = 99 WHERE id = 'root'")
    raw.commit()
    raw.close()
    broken = cli("check", "--db", str(store))
    assert broken.returncode == 1 and "1 miscounted session(s)" in broken.stdout
    assert "99 → 3" in broken.stdout and "integrity: ok" in broken.stdout
    repaired = as_json(cli("check", "--repair", "--db", str(store), "--json"))
    assert repaired["ok"] is True and repaired["repaired_counters"] == 1
    assert [row["id"] for row in repaired["miscounted"]] == ["root"]
    with SessionDB(store) as db:
        assert db.get_session("root")["message_count"] == 3


def test_check_of_a_healthy_store_exits_0(cli: Run, store: Path) -> None:
    report = as_json(cli("check", "--db", str(store), "--json"))
    assert report["ok"] is True and report["miscounted"] == [] and report["fts"] is None


def test_demo_writes_and_searches(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    out = ok(cli("demo", "--db", str(path))).stdout
    assert "search" in out and "hit(s)" in out
    assert counts(path) == (2, 5)


# ----------------------------------------------------------------------
# errors: one red line, exit 1, never a traceback, never a stray state.db
# ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["show", "nope"],
        ["lineage", "nope"],
        ["delete", "nope"],
        ["title", "nope", "A title"],
        ["export", "nope"],
    ],
)
def test_unknown_id_is_one_line_and_exit_1(cli: Run, store: Path, args: list[str]) -> None:
    one_error_line(cli(*args, "--db", str(store)), "no session", "nope")


@pytest.mark.parametrize(
    "args",
    [
        ["current"],
        ["sessions"],
        ["show", "x"],
        ["search", "docker"],
        ["prune", "--older-than", "1"],
        ["check"],
    ],
)
def test_a_missing_store_is_an_error_and_is_not_created(
    cli: Run, tmp_path: Path, args: list[str]
) -> None:
    path = tmp_path / "missing" / "state.db"
    one_error_line(cli(*args, "--db", str(path)), "no database", str(path))
    assert not path.parent.exists()


def test_a_missing_import_file_or_non_database_file_is_one_line(cli: Run, tmp_path: Path) -> None:
    target = tmp_path / "target.db"
    one_error_line(cli("import", str(tmp_path / "nope.jsonl"), "--db", str(target)), "no such file")
    assert not target.exists()
    junk = tmp_path / "junk.db"
    junk.write_text("this is not sqlite\n" * 100)
    one_error_line(cli("sessions", "--db", str(junk)), "not a database")


def test_usage_errors_exit_2(cli: Run, store: Path) -> None:
    both = cli("sessions", "--db", str(store), "--url", f"sqlite:///{store}")
    assert both.returncode == 2 and "not both" in both.stderr
    assert cli("prune", "--db", str(store)).returncode == 2, "--older-than is required"
    for args in (("sessions", "--db", ""), ("import", ""), ("recover", "--from", "", "--to", "x")):
        empty = cli(*args)
        assert empty.returncode == 2 and "empty path" in empty.stderr, empty.stderr
        assert "is a directory" not in empty.stderr  # Path('') is '.', not what was typed


def test_a_locked_store_past_patience_is_one_line(cli: Run, store: Path) -> None:
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        result = cli("title", "root", "Renamed", "--db", str(store), "--patience", "0.3")
        one_error_line(result, "locked")
        assert time.monotonic() - started < 30
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with SessionDB(store) as db:
        assert db.get_session_title("root") == "Fix Docker Build"


# ----------------------------------------------------------------------
# reading commands only read
# ----------------------------------------------------------------------
READING = [
    ["sessions"],
    ["show", "sess_root"],
    ["lineage", "sess_root"],
    ["search", "docker"],
    ["current"],
    ["stats"],
    ["export"],
    ["check"],
]


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a folder with its bytes and permission bits: what "nothing changed" means.

    SQLite's own ``-shm`` index is left out: any reader of a WAL file maps it
    (the agent's code and the sqlite3 shell alike); an empty ``-wal`` stays in,
    as proof that nothing was written.
    """
    return {
        p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


def _unchanged(before: dict[str, tuple[bytes, int]], after: dict[str, tuple[bytes, int]]) -> None:
    """Same files with the same bytes and modes; at most an empty ``-wal`` more."""
    added = {name: value for name, value in after.items() if name not in before}
    assert all(name.endswith("-wal") and data == b"" for name, (data, _) in added.items()), added
    assert {name: value for name, value in after.items() if name in before} == before


@pytest.mark.parametrize("args", READING, ids=lambda a: a[0])
def test_reading_commands_neither_migrate_nor_chmod_an_old_file(
    cli: Run, tmp_path: Path, args: list[str]
) -> None:
    from tests.support.legacy_schema import build_legacy_db

    folder = tmp_path / "old"
    folder.mkdir()
    path = folder / "state.db"
    build_legacy_db(path, 3)  # the old code's v3: no alembic_version, no billing columns
    os.chmod(path, 0o644)
    before = _files(folder)
    ok(cli(*args, "--db", str(path)))
    _unchanged(before, _files(folder))


@pytest.mark.parametrize("args", READING, ids=lambda a: a[0])
def test_reading_commands_refuse_an_empty_file_and_a_foreign_database(
    cli: Run, tmp_path: Path, args: list[str]
) -> None:
    empty, foreign = tmp_path / "empty.db", tmp_path / "foreign.db"
    empty.touch()
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE foo (x INTEGER)")
    before = _files(tmp_path)
    one_error_line(cli(*args, "--db", str(empty)), "0 bytes, no store")
    one_error_line(cli(*args, "--db", str(foreign)), "not a Hermes session store", "foo")
    _unchanged(before, _files(tmp_path))


@pytest.mark.parametrize(
    "args",
    [["upgrade"], ["delete", "x"], ["title", "x", "T"], ["demo"], ["prune", "--older-than", "9"]],
)
def test_writing_commands_refuse_a_foreign_database_too(
    cli: Run, tmp_path: Path, args: list[str]
) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE foo (x INTEGER)")
    before = _files(tmp_path)
    one_error_line(cli(*args, "--db", str(foreign)), "not a Hermes session store")
    _unchanged(before, _files(tmp_path))


# ----------------------------------------------------------------------
# never a traceback (issue #16): numbers, damaged files, a missing driver, closed pipes
# ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "--limit", "99999999999999999999"],
        ["search", "docker", "--offset", "99999999999999999999"],
        ["stats", "--top", "9223372036854775808"],
    ],
)
def test_a_number_past_64_bits_is_one_line(cli: Run, store: Path, args: list[str]) -> None:
    one_error_line(cli(*args, "--db", str(store)), "64 bits")


def test_show_on_a_file_with_damaged_pages_is_one_line(cli: Run, store: Path) -> None:
    with closing(sqlite3.connect(store)) as connection:
        (root,) = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'messages'"
        ).fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    with store.open("r+b") as raw:
        raw.seek((root - 1) * page_size)
        raw.write(b"\xff" * page_size)
    one_error_line(cli("show", "root", "--db", str(store)), str(store), "damaged")


def test_copy_to_postgresql_without_psycopg_says_which_extra_to_install(
    cli: Run, store: Path, tmp_path: Path
) -> None:
    # A Python that cannot import psycopg, as after `pip install hermes-store` without extras.
    blocker = tmp_path / "no-psycopg"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['psycopg'] = None\nsys.modules['psycopg2'] = None\n"
    )
    result = cli(
        "copy",
        "--from",
        str(store),
        "--to",
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
        env={"PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])},
    )
    one_error_line(result, "psycopg", "hermes-store[postgresql]")


def test_export_into_a_pipe_closed_early_ends_quietly(tmp_path: Path, home: Path) -> None:
    """``hermes-store export | head -c1``: status 0 or 141, as other Unix tools, and no noise."""
    path = tmp_path / "big.db"
    with SessionDB(path) as db:
        for n in range(40):
            db.create_session(f"s{n}", "cli")
            db.append_messages(f"s{n}", [{"role": "user", "content": "x" * 4000}] * 10)
    environment = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": str(REPO)}
    reader = subprocess.Popen(
        [sys.executable, "-m", "hermes_store.cli", "export", "--db", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.read(1) == b"{"
    reader.stdout.close()  # what `head -c1` does after its byte
    stderr = reader.stderr.read().decode()
    assert reader.wait(timeout=120) in (0, 141), stderr
    assert stderr == "", stderr


def test_help_shows_flags_as_flags_and_there_is_a_version(cli: Run) -> None:
    shown = ok(cli("sessions", "--help")).stdout
    assert "--json" in shown and "<bool>" not in shown, shown
    version = ok(cli("--version")).stdout
    assert version.startswith("hermes-store ") and "schema version 6, revision 0021" in version


def test_a_bad_import_line_says_that_nothing_was_imported(cli: Run, tmp_path: Path) -> None:
    dump, target = tmp_path / "bad.jsonl", tmp_path / "target.db"
    dump.write_text('{"id": "fine", "source": "cli", "started_at": 1}\nnot json\n')
    one_error_line(cli("import", str(dump), "--db", str(target)), "line 2", "nothing was imported")


def test_an_import_message_id_past_64_bits_is_one_line_and_imports_nothing(
    cli: Run, tmp_path: Path
) -> None:
    """Before, the id reached the driver: OverflowError, a traceback, after the line passed."""
    dump, target = tmp_path / "big.jsonl", tmp_path / "target.db"
    message = {"id": 2**64, "role": "user", "content": "a", "timestamp": 1}
    session = {"id": "s", "source": "cli", "started_at": 1, "messages": [message]}
    dump.write_text(json.dumps(session) + "\n")
    done = cli("import", str(dump), "--db", str(target))
    one_error_line(done, "line 1", "messages[0].id", "64 bits", "nothing was imported")
    with SessionDB(target) as db:
        assert db.session_count() == 0 and db.message_count() == 0


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ("input_tokens", "session"),
        ("estimated_cost_usd", "session"),
        ("actual_cost_usd", "session"),
        ("token_count", "message"),
    ],
)
def test_an_import_with_a_negative_count_or_cost_is_refused_as_an_append_would_be(
    cli: Run, tmp_path: Path, field: str, where: str
) -> None:
    """Before, import stored -5 tokens or -2.5 USD that append and record_usage refuse."""
    dump, target = tmp_path / "negative.jsonl", tmp_path / "target.db"
    message: dict[str, object] = {"role": "user", "content": "a", "timestamp": 1}
    session: dict[str, object] = {"id": "s", "source": "cli", "started_at": 1}
    (session if where == "session" else message)[field] = -5
    dump.write_text(json.dumps({**session, "messages": [message]}) + "\n")
    done = cli("import", str(dump), "--db", str(target))
    one_error_line(done, "line 1", field, ">= 0", "nothing was imported")
    with SessionDB(target) as db:
        assert db.session_count() == 0 and db.message_count() == 0


def test_an_import_of_a_session_that_is_its_own_parent_is_refused(cli: Run, tmp_path: Path) -> None:
    """Before, it was imported as a child of itself: in no listing (not a root), its own
    ancestor and descendant."""
    dump, target = tmp_path / "loop.jsonl", tmp_path / "target.db"
    loop = {"id": "y", "source": "cli", "started_at": 1, "parent_session_id": "y"}
    dump.write_text(json.dumps({**loop, "messages": []}) + "\n")
    done = cli("import", str(dump), "--db", str(target))
    one_error_line(done, "line 1", "parent_session_id", "itself", "nothing was imported")
    with SessionDB(target) as db:
        assert db.session_count() == 0


def test_an_import_whose_parents_form_a_loop_keeps_every_session_listed(
    cli: Run, tmp_path: Path
) -> None:
    """Before, a -> b -> a was linked as written: neither was a root, so neither was listed,
    and each was the other's ancestor."""
    dump, target = tmp_path / "loop.jsonl", tmp_path / "target.db"
    rows = [
        {"id": "a", "source": "cli", "started_at": 1, "parent_session_id": "b", "messages": []},
        {"id": "b", "source": "cli", "started_at": 2, "parent_session_id": "a", "messages": []},
    ]
    dump.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = ok(cli("import", str(dump), "--db", str(target)))
    assert "descends from it" in done.stderr and "Traceback" not in done.stderr
    with SessionDB(target) as db:
        roots = [s["id"] for s in db.list_sessions_rich(include_children=False)]
        assert len(roots) == 1
        chain = [entry["id"] for entry in db.get_ancestors(roots[0])]
        assert chain == roots and sorted(s["id"] for s in db.export_all()) == ["a", "b"]


def test_prune_prints_what_its_batches_deleted(cli: Run, store: Path) -> None:
    """One plan: the count is the batches' own, and the sessions listed are the ones deleted."""
    done = as_json(cli("prune", "--older-than", "30", "--db", str(store), "--json"))
    assert done["dry_run"] is False and done["count"] == 2
    assert sorted(row["id"] for row in done["sessions"]) == ["other", "root"]
    with SessionDB(store) as db:
        assert db.get_session("root") is None and db.get_session("other") is None


# ----------------------------------------------------------------------
# archive, pin and upkeep (issue #30)
# ----------------------------------------------------------------------
def _listed(cli: Run, store: Path, *flags: str) -> list[str]:
    rows = as_json(cli("sessions", "--include-children", *flags, "--db", str(store), "--json"))
    return [row["id"] for row in rows]


def test_archive_and_pin_from_the_command_line(cli: Run, store: Path) -> None:
    everything = _listed(cli, store)
    assert "archived session other" in ok(cli("archive", "other", "--db", str(store))).stdout
    ok(cli("pin", "recent", "--db", str(store)))
    assert _listed(cli, store) == [name for name in everything if name != "other"]
    assert _listed(cli, store, "--all") == everything
    assert _listed(cli, store, "--archived") == ["other"]
    assert _listed(cli, store, "--pinned") == ["recent"]
    rows = as_json(cli("sessions", "--archived", "--db", str(store), "--json"))
    assert [(row["archived"], row["pinned"]) for row in rows] == [(1, 0)]
    assert "restored" in ok(cli("archive", "other", "--undo", "--db", str(store))).stdout
    ok(cli("pin", "recent", "--undo", "--db", str(store)))
    assert _listed(cli, store) == everything and _listed(cli, store, "--pinned") == []
    one_error_line(cli("archive", "nope", "--db", str(store)), "nope")
    result = cli("sessions", "--all", "--pinned", "--db", str(store))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_prune_auto_runs_once_per_interval_and_spares_pins(cli: Run, store: Path) -> None:
    ok(cli("pin", "root", "--db", str(store)))
    done = as_json(cli("prune", "--auto", "--older-than", "30", "--db", str(store), "--json"))
    assert done == {"skipped": False, "pruned": 1, "vacuumed": True}  # other; root is pinned
    again = as_json(cli("prune", "--auto", "--db", str(store), "--json"))
    assert again["skipped"] is True
    assert "skipped" in ok(cli("prune", "--auto", "--db", str(store))).stdout
    with SessionDB(store) as db:
        assert db.get_session("root") is not None and db.get_session("other") is None
        assert db.get_meta("last_auto_prune") is not None
    result = cli("prune", "--db", str(store))
    assert result.returncode == 2 and "--older-than" in result.stderr
    result = cli("prune", "--auto", "--dry-run", "--db", str(store))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_optimize_records_the_last_vacuum(cli: Run, store: Path) -> None:
    with SessionDB(store) as db:
        assert db.get_meta("last_vacuum") is None
    ok(cli("optimize", "--no-vacuum", "--db", str(store)))
    with SessionDB(store) as db:
        assert db.get_meta("last_vacuum") is None
    ok(cli("optimize", "--db", str(store)))
    with SessionDB(store) as db:
        assert float(db.get_meta("last_vacuum") or 0) > OLD
