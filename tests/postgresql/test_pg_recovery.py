"""PostgreSQL going away and coming back: every thread recovers on its next call.

Real server deaths: a backend ended with ``pg_terminate_backend`` (on the test
server), and a whole server stopped with ``pg_ctl stop -m immediate`` and
started again (a throwaway server of this module's own, started with
``.ci/postgres.sh``, so nobody else's tests see it go). While the server is
away a call fails with ``StoreUnavailableError``, never a driver's error;
once it is back, the next call of every thread works.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB, StoreUnavailableError
from hermes_store.domain.messages import MessageIn
from tests.support.paths import REPO

POSTGRES_SH = REPO / ".ci" / "postgres.sh"
THREADS = 4


# ----------------------------------------------------------------------
# a backend that dies (the shared test server)
# ----------------------------------------------------------------------
@pytest.fixture
def other(pg_url: URL) -> Iterator[Connection]:
    """A plain connection of another client, in autocommit, to end the store's backends."""
    engine = create_engine(pg_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def _backend_of_this_thread(db: SessionDB) -> int:
    with db.store.read() as uow:
        return int(uow.connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def _terminate(other: Connection, pid: int) -> None:
    assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    for _ in range(200):  # until the backend is gone (its socket then reads EOF)
        gone = other.execute(
            text("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = :pid)"),
            {"pid": pid},
        ).scalar()
        if gone:
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} did not end")


def test_a_kept_connection_whose_backend_died_is_replaced_before_the_next_call(
    pg_url: URL, other: Connection
) -> None:
    """Before, the first call after any backend death failed (kept connections were never
    pinged), with a raw psycopg error from the begin hook for a read."""
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
        for read_first in (True, False):
            _terminate(other, _backend_of_this_thread(db))
            if read_first:
                assert db.get_session("s")["message_count"] == 0
            db.append_message("s", "user", "after the backend died")
        assert db.get_session("s")["message_count"] == 2


def test_a_search_whose_backend_dies_mid_statement_fails_once_and_the_thread_recovers(
    pg_url: URL, other: Connection
) -> None:
    """Before, search swallowed the dead connection as "no matches", the unit's commit then
    raised PendingRollbackError and the skipped rollback left the thread failing for good."""
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "findable words")
        outcome: dict[str, Any] = {}

        def search() -> None:
            try:
                outcome["hits"] = db.search_messages("findable")
            except Exception as error:
                outcome["error"] = error
            try:  # the same thread, right after: must work
                outcome["again"] = db.search_messages("findable")
            except Exception as error:
                outcome["again_error"] = error

        locking = create_engine(pg_url, poolclass=NullPool)
        with locking.connect() as locker:
            locker.execute(text("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE"))
            searcher = threading.Thread(target=search)
            searcher.start()
            waiting = _wait_for_a_backend_waiting_on_a_lock(other)
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": waiting})
            time.sleep(0.2)  # let the first search fail, and keep the lock a little longer
            locker.rollback()
        locking.dispose()
        searcher.join(timeout=60)
        assert not searcher.is_alive()
        assert isinstance(outcome.get("error"), StoreUnavailableError), outcome
        assert "again_error" not in outcome, outcome
        assert [hit["content"] for hit in outcome["again"][0]["context"]] == ["findable words"]


def test_a_unit_whose_connection_died_under_it_leaves_the_thread_working(
    pg_url: URL, other: Connection
) -> None:
    """Code in a unit that catches a statement's error and goes on (as search did) makes the
    COMMIT fail; the rollback must still run, or every later unit of the thread fails."""
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
        with pytest.raises(StoreUnavailableError), db.store.write() as uow:
            _terminate(
                other, int(uow.connection.exec_driver_sql("SELECT pg_backend_pid()").scalar())
            )
            with contextlib.suppress(Exception):  # swallowed by the unit's own code
                uow.messages.append("s", MessageIn("user", "lost with the backend"))
        db.append_message("s", "user", "the thread goes on")
        assert db.get_session("s")["message_count"] == 1


def _wait_for_a_backend_waiting_on_a_lock(other: Connection) -> int:
    for _ in range(500):
        pid = other.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid() LIMIT 1"
            )
        ).scalar()
        if pid is not None:
            return int(pid)
        time.sleep(0.01)
    raise AssertionError("the search never waited for the lock")


# ----------------------------------------------------------------------
# a server that stops and starts again (this module's own)
# ----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class OwnServer:
    """A throwaway PostgreSQL that the test may stop (``-m immediate``) and start again."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder, self.port = folder, port
        self.url: URL | None = None

    def start(self) -> None:
        done = subprocess.run(
            ["bash", str(POSTGRES_SH), "start", str(self.folder), str(self.port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        self.url = make_url(done.stdout.strip().split("=", 1)[1])

    def stop_immediately(self) -> None:
        bindir = next(p for p in sorted(Path("/usr/lib/postgresql").glob("*/bin")))
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", str(bindir / "pg_ctl"), "-D",
             str(self.folder / "data"), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(POSTGRES_SH), "stop", str(self.folder)], capture_output=True, timeout=60
        )


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("starting a throwaway PostgreSQL needs root (it runs as user postgres)")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("no PostgreSQL server binaries in /usr/lib/postgresql")
    folder = Path(tempfile.mkdtemp(prefix="hermes-pg-restart-"))
    server = OwnServer(folder, _free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _in_threads(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run each call on a thread of its own; what each returned or raised."""
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def test_after_a_server_restart_every_thread_recovers_on_its_next_call(
    own_server: OwnServer,
) -> None:
    assert own_server.url is not None
    with SessionDB(own_server.url) as db:
        db.create_session("s", "cli")
        # Each thread keeps its connection between calls; they will all be dead.
        barrier = threading.Barrier(THREADS + 1)
        resume = threading.Event()
        results: list[Any] = [None] * THREADS

        def worker(index: int) -> None:
            try:
                db.append_message("s", "user", f"before {index}")
                barrier.wait()
                resume.wait(120)
                results[index] = db.append_message("s", "user", f"after {index}")
            except Exception as error:
                results[index] = error

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        barrier.wait()
        db.get_session("s")  # the main thread keeps one too

        own_server.stop_immediately()
        down = [
            _outcome(lambda: db.get_session("s")),
            _outcome(lambda: db.search_messages("before")),
            _outcome(lambda: db.append_message("s", "user", "never lands")),
            _outcome(lambda: db.get_session("s")),
        ]
        assert down == [StoreUnavailableError.__name__] * 4, down

        own_server.start()
        resume.set()
        for thread in threads:
            thread.join(timeout=120)
        assert all(isinstance(result, int) for result in results), results
        assert db.get_session("s")["message_count"] == 2 * THREADS
        assert len(db.search_messages("before")) == THREADS
        assert all(isinstance(r, int) for r in _in_threads([lambda: _count(db)] * THREADS))


def _outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except Exception as error:
        return type(error).__name__
    return "ok"


def _count(db: SessionDB) -> int:
    return db.message_count("s")
