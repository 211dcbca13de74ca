"""PostgreSQL under concurrent writers: real processes, exact counters, deadlocks retried.

The SQLite contention tests (tests/contention/test_contention.py) are about the file
lock; here the same worker script runs against a brand-new PostgreSQL
database, so the processes also race on creating the schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import text

from hermes_store import SessionDB, UnitOfWork
from hermes_store.domain.usage import UsageReport
from hermes_store.schema.migrate import HEAD_SCHEMA_VERSION
from hermes_store.tools.check import check
from hermes_store.uow.store import Store
from tests.support.paths import SUPPORT
from tests.support.processes import open_at_once

WORKER = SUPPORT / "contention_worker.py"
WORKERS = 6
APPENDS = 40


def test_six_writer_processes_keep_postgresql_counters_exact(
    tmp_path: Path, pg_fresh_url: Any, pg_route: Any
) -> None:
    url = pg_route(pg_fresh_url()).render_as_string(hide_password=False)
    with SessionDB(url) as db:
        db.create_session("shared", "gateway")
    go_file = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, str(n), str(APPENDS), str(go_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    go_file.touch()
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, f"worker failed:\n{err}"
        reports.append(json.loads(out))

    with SessionDB(url) as db:
        for report in reports:
            own = db.get_session(f"worker-{report['worker']}")
            assert own["message_count"] == db.message_count(own["id"]) == APPENDS
            assert own["tool_call_count"] == report["tool_calls"]
        shared = db.get_session("shared")
        assert shared["message_count"] == db.message_count("shared")
        assert shared["message_count"] == sum(r["shared"] for r in reports)
        assert (shared["input_tokens"], shared["output_tokens"]) == (
            WORKERS * APPENDS,
            2 * WORKERS * APPENDS,
        )
        assert shared["estimated_cost_usd"] == WORKERS * APPENDS * 0.5
        assert len(db.search_messages("says", limit=1000)) == WORKERS * APPENDS
        report = check(db.store)
        assert report.ok, report


def test_processes_opening_an_empty_postgresql_database_at_once_all_get_the_schema(
    pg_fresh_url: Any, pg_route: Any
) -> None:
    url = pg_route(pg_fresh_url()).render_as_string(hide_password=False)
    open_at_once(url, WORKERS)
    with Store(url) as store, store.read() as uow:
        assert uow.sessions.count() == WORKERS
        versions = uow.connection.execute(text("SELECT version FROM schema_version")).all()
        assert [tuple(v) for v in versions] == [(HEAD_SCHEMA_VERSION,)]


class _CrossLocker:
    """Two of these lock the same two sessions in opposite orders: a real deadlock."""

    def __init__(self, store: Store, first: str, second: str, barrier: threading.Barrier) -> None:
        self._store = store
        self.order = (first, second)
        self.barrier = barrier
        self.attempts = 0

    def bump_both(self) -> None:
        self._store.transact(self._unit)

    def _unit(self, uow: UnitOfWork) -> None:
        self.attempts += 1
        uow.sessions.record_usage(self.order[0], UsageReport(input_tokens=1))
        if self.attempts == 1:
            self.barrier.wait(timeout=30)  # both hold their first row lock now
        uow.sessions.record_usage(self.order[1], UsageReport(input_tokens=1))


def test_a_deadlocked_write_unit_is_run_again_and_counts_once(pg_url: Any, pg_route: Any) -> None:
    # PostgreSQL only: SQLite's writers queue for one file lock, there is no deadlock.
    with SessionDB(pg_route(pg_url)) as db:
        db.create_session("a", "cli")
        db.create_session("b", "cli")
        barrier = threading.Barrier(2)
        lockers = [
            _CrossLocker(db.store, "a", "b", barrier),
            _CrossLocker(db.store, "b", "a", barrier),
        ]
        errors: list[BaseException] = []

        def run(locker: _CrossLocker) -> None:
            try:
                locker.bump_both()
            except BaseException as error:  # reported by the assertion below
                errors.append(error)

        threads = [threading.Thread(target=run, args=(locker,)) for locker in lockers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(locker.attempts for locker in lockers) == [1, 2], "one unit was retried"
        assert db.get_session("a")["input_tokens"] == 2
        assert db.get_session("b")["input_tokens"] == 2
