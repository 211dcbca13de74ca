"""The test server's hot standby (``.ci/standby.sh``): its URL, and the drills run on it.

One standby serves every xdist worker, and some tests stop it or pause its
replay: each test holding a :class:`Standby` holds an exclusive file lock
for its duration, so no other worker's replica test runs meanwhile, and it
leaves the standby running and replaying whatever the test did.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

STANDBY_URL_ENV = "HERMES_TEST_PG_STANDBY_URL"
STANDBY_DIR_ENV = "HERMES_TEST_PG_STANDBY_DIR"
REPO = Path(__file__).resolve().parents[2]


def standby_server_url() -> URL:
    """The standby's URL; skips (locally) or fails (in CI) when none was started."""
    raw = os.environ.get(STANDBY_URL_ENV)
    if raw and os.environ.get(STANDBY_DIR_ENV):
        return make_url(raw)
    if os.environ.get("CI"):
        pytest.fail(
            f"CI is set but ${STANDBY_URL_ENV} (or ${STANDBY_DIR_ENV}) is not: .ci/run must "
            'start the hot standby (eval "$(bash .ci/standby.sh start DIR PORT PRIMARY_PORT)") '
            "before pytest"
        )
    pytest.skip(
        f"no hot standby configured: set {STANDBY_URL_ENV} and {STANDBY_DIR_ENV} "
        "(.ci/standby.sh start DIR PORT PRIMARY_PORT prints both) to run the replica tests"
    )


def _scalar(url: URL, sql: str) -> object:
    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar()
    finally:
        engine.dispose()


class Standby:
    """The standby of ``primary`` (the test's database on the primary), under the lock."""

    def __init__(self, primary: URL, server: URL) -> None:
        self.primary = primary
        self.url = server.set(database=primary.database)
        """The same database on the standby: what a store's ``read_url`` names."""
        self._admin = server.set(database="postgres")
        """Its ``postgres`` database: there before the test's own has been replayed."""
        self._dir = os.environ[STANDBY_DIR_ENV]
        self._primary_port = str(primary.port)

    def caught_up(self, timeout_s: float = 30.0) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        end = _scalar(self.primary, "SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + timeout_s
        while True:
            behind = _scalar(
                self._admin, f"SELECT pg_wal_lsn_diff('{end}'::pg_lsn, pg_last_wal_replay_lsn())"
            )
            if behind is not None and float(str(behind)) <= 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is still {behind} bytes behind")
            time.sleep(0.05)

    def pause_replay(self) -> None:
        _scalar(self._admin, "SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        _scalar(self._admin, "SELECT pg_wal_replay_resume()")

    def stop(self) -> None:
        subprocess.run(["bash", str(REPO / ".ci/standby.sh"), "stop", self._dir], check=True)

    def start(self) -> None:
        port = str(self.url.port)
        subprocess.run(
            ["bash", str(REPO / ".ci/standby.sh"), "start", self._dir, port, self._primary_port],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def restore(self) -> None:
        """Running and replaying again, whatever the test did to it."""
        try:
            self.resume_replay()
        except Exception:  # stopped: starting it replays from where it stopped
            self.start()
        self.caught_up()


@contextmanager
def standby_for(primary: URL) -> Iterator[Standby]:
    """The standby of ``primary``'s database, held alone (a file lock) until the block ends."""
    server = standby_server_url()
    lock_path = Path(os.environ[STANDBY_DIR_ENV]).parent / (
        Path(os.environ[STANDBY_DIR_ENV]).name + ".test-lock"
    )
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        standby = Standby(primary, server)
        try:
            standby.restore()  # a previous test's database, truncation and writes replayed
            yield standby
        finally:
            standby.restore()
