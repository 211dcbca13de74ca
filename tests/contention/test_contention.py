"""Several real processes writing one state.db at once: nothing lost, nothing miscounted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import HEAD_SCHEMA_VERSION
from tests.support.paths import SUPPORT
from tests.support.processes import open_at_once

pytestmark = pytest.mark.sqlite_only(
    "SQLite's file lock and WAL; PostgreSQL: test_pg_contention.py"
)

WORKER = SUPPORT / "contention_worker.py"
WORKERS = 6
APPENDS = 60


def _start_workers(db_path: Path, go_file: Path, mode: str) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(db_path), str(n), str(APPENDS), str(go_file), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_six_writer_processes_lose_nothing(db_path: Path, tmp_path: Path, mode: str) -> None:
    """``async``: the same writes through AsyncSessionDB, whose tasks share commits."""
    with SessionDB(db_path) as db:
        db.create_session("shared", "gateway")
    go_file = tmp_path / "go"
    workers = _start_workers(db_path, go_file, mode)
    go_file.touch()
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, f"worker failed:\n{err}"
        assert "locked" not in err.lower()
        reports.append(json.loads(out))

    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    for report in reports:
        own = f"worker-{report['worker']}"
        count, calls = raw.execute(
            "SELECT message_count, tool_call_count FROM sessions WHERE id = ?", (own,)
        ).fetchone()
        real = raw.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (own,)).fetchone()
        assert count == real[0] == APPENDS
        assert calls == report["tool_calls"]
    shared_expected = sum(r["shared"] for r in reports)
    count, tokens_in, tokens_out, cost = raw.execute(
        "SELECT message_count, input_tokens, output_tokens, estimated_cost_usd "
        "FROM sessions WHERE id = 'shared'"
    ).fetchone()
    real_shared = raw.execute(
        "SELECT COUNT(*) FROM messages WHERE session_id = 'shared'"
    ).fetchone()[0]
    assert count == real_shared == shared_expected
    assert (tokens_in, tokens_out) == (WORKERS * APPENDS, 2 * WORKERS * APPENDS)
    assert cost == WORKERS * APPENDS * 0.5
    # Every message is indexed: the FTS index agrees with the table.
    raw.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    indexed = raw.execute(
        "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'says'"
    ).fetchone()[0]
    assert indexed == WORKERS * APPENDS
    raw.close()


def test_processes_opening_a_new_file_at_once_all_get_the_schema(tmp_path: Path) -> None:
    db_path = tmp_path / "fresh" / "state.db"
    # No shared session exists yet: the workers only race on opening
    # (migrating) the brand-new file.
    open_at_once(str(db_path), WORKERS)
    raw = sqlite3.connect(db_path)
    assert raw.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == WORKERS
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(HEAD_SCHEMA_VERSION,)]
    raw.close()
