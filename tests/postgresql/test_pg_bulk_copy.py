"""Copying into PostgreSQL in bulk (issue #28, item 4): COPY, indexes rebuilt, progress, resume.

A real ``hermes-store copy`` process is killed with SIGKILL part-way through
its messages (after its first batches committed, while the search indexes
are dropped); run again, it finishes the copy: every row exactly once, the
counters and kept totals right, the indexes back, the planner's statistics
taken.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB, Store
from hermes_store.backends.postgresql.health import SEARCH_INDEXES
from hermes_store.tools.check import check
from hermes_store.tools.copy import REBUILD_AT
from tests.support.paths import REPO

SESSIONS = 12
PER_SESSION = (REBUILD_AT // SESSIONS) + 100


def _source(path: Path) -> int:
    """A file above :data:`REBUILD_AT` messages, with usage, so the bulk path drops indexes."""
    with SessionDB(path) as db:
        for n in range(SESSIONS):
            sid = f"s{n:02d}"
            db.create_session(sid, "cli", model=f"model-{n % 3}")
            for start in range(0, PER_SESSION, 2000):
                db.append_messages(
                    sid,
                    [
                        {"role": "user", "content": f"message {k} of {sid} about docker"}
                        for k in range(start, min(start + 2000, PER_SESSION))
                    ],
                )
            db.update_token_counts(sid, input_tokens=n, output_tokens=2 * n, estimated_cost_usd=n)
    return SESSIONS * PER_SESSION


def _command(source: Path, target: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hermes_store.cli",
        "copy",
        "--from",
        str(source),
        "--to",
        target,
        *extra,
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HERMES_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}


def _scalar(url: URL, sql: str) -> Any:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def test_a_killed_copy_run_again_finishes_exactly(
    tmp_path: Path, pg_fresh_url: Callable[[], URL]
) -> None:
    source = tmp_path / "state.db"
    total = _source(source)
    url = pg_fresh_url()
    Store(url).close()  # the schema, so the count below can be read while the copy runs
    target = url.render_as_string(hide_password=False)
    copying = subprocess.Popen(
        _command(source, target, "--batch-size", "3000"),
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    copied = 0
    while copied == 0 and time.monotonic() < deadline and copying.poll() is None:
        time.sleep(0.05)
        copied = _scalar(url, "SELECT COUNT(*) FROM messages")
    os.kill(copying.pid, signal.SIGKILL)
    copying.wait()
    partial = _scalar(url, "SELECT COUNT(*) FROM messages")
    assert 0 < partial < total, (partial, total)
    assert partial % 3000 == 0 or partial == total  # whole batches only
    indexes = _scalar(
        url,
        "SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ("
        + ", ".join(f"'{name}'" for name in SEARCH_INDEXES)
        + ")",
    )
    assert indexes == 0  # dropped for the load, not yet built

    again = subprocess.run(
        _command(source, target), env=_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    assert f"{total - partial} of {total} message(s)" in again.stdout, again.stdout

    assert _scalar(url, "SELECT COUNT(*) FROM messages") == total
    assert _scalar(url, "SELECT COUNT(DISTINCT id) FROM messages") == total
    assert _scalar(url, "SELECT reltuples FROM pg_class WHERE relname = 'messages'") > 0  # ANALYZE
    with SessionDB(target) as db, SessionDB(source) as original:
        assert db.message_count() == total
        assert db.token_usage_by_model() == original.token_usage_by_model()
        for n in range(SESSIONS):
            assert db.get_session(f"s{n:02d}") == original.get_session(f"s{n:02d}")
        assert len(db.search_messages("docker", limit=5)) == 5
        assert db.append_message("s00", "user", "after") > total
    with Store(url) as store:
        report = check(store)
        assert report.ok and report.totals == [] and report.fts is None, report


def test_copy_prints_progress_lines_when_stderr_is_not_a_terminal(
    tmp_path: Path, pg_fresh_url: Callable[[], URL]
) -> None:
    source = tmp_path / "small.db"
    with SessionDB(source) as db:
        db.create_session("a", "cli")
        db.append_messages("a", [{"role": "user", "content": f"m{k}"} for k in range(500)])
    target = pg_fresh_url().render_as_string(hide_password=False)
    done = subprocess.run(
        _command(source, target, "--batch-size", "100"),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "copying messages: starting, 500 to do" in lines, lines
    finished = [line for line in lines if line.startswith("copying messages: 500 of 500")]
    assert finished and "/s" in finished[0] and "done in" in finished[0], lines
    assert any(line.startswith("copying indexes:") for line in lines), lines


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"content": "half\x00way"}, "text with a NUL character (U+0000)"),
        ({"content": "huge", "token_count": 2**40}, "a number is out of range on PostgreSQL"),
    ],
    ids=["nul", "int64-token-count"],
)
def test_a_message_postgresql_cannot_hold_stops_the_copy_with_one_line_and_its_batch_unwritten(
    tmp_path: Path, pg_url: URL, bad: dict[str, Any], reason: str
) -> None:
    """``COPY`` streams rows past the engine's error rules: a message SQLite stores but
    PostgreSQL refuses reached the CLI as psycopg's raw error and a traceback."""
    source = tmp_path / "state.db"
    with SessionDB(source) as db:
        db.create_session("a", "cli")
        db.append_messages("a", [{"role": "user", "content": f"fine {k}"} for k in range(5)])
        db.append_messages("a", [{"role": "assistant", **bad}])
    target = pg_url.set(password="s3cret-pw").render_as_string(hide_password=False)
    run = subprocess.run(
        _command(source, target), env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr, run.stderr
    assert "s3cret-pw" not in run.stderr + run.stdout
    assert f"messages 1 to 6 (one batch) were not copied: {reason}" in run.stderr, run.stderr
    assert _scalar(pg_url, "SELECT COUNT(*) FROM messages") == 0  # the one batch rolled back
