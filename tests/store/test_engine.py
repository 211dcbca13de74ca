"""The SQLite rules of hermes_store.backends.sqlite.engine, on real files and real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from hermes_store import ContentionPolicy, SessionDB, Store, StoreLockedError
from hermes_store.backends.sqlite.engine import is_lock_error
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn
from tests.support.paths import SUPPORT

pytestmark = pytest.mark.sqlite_only(
    "the SQLite engine rules (WAL, BEGIN IMMEDIATE, checkpoints); PostgreSQL: test_pg_engine.py"
)

LOCK_HOLDER = SUPPORT / "lock_holder.py"


@contextmanager
def lock_held(path: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holds the write lock of ``path`` for ``seconds``."""
    holder = subprocess.Popen(
        [sys.executable, str(LOCK_HOLDER), str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_connections_use_wal_foreign_keys_and_short_busy_timeout(db_path: Path) -> None:
    store = Store(db_path)
    with store.read() as uow:
        pragma = uow.connection.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA foreign_keys").scalar() == 1
        assert pragma("PRAGMA busy_timeout").scalar() == 1000
    store.close()


def test_write_waits_out_a_lock_held_by_another_process(db: SessionDB, db_path: Path) -> None:
    db.create_session("s1", "cli")
    with lock_held(db_path, 5.0):
        started = time.monotonic()
        message_id = db.append_message("s1", "user", "written after the lock is released")
        waited = time.monotonic() - started
    assert waited >= 4.0, "the write must have waited for the other process"
    assert [m["id"] for m in db.get_messages("s1")] == [message_id]
    assert db.get_session("s1")["message_count"] == 1


def test_patience_running_out_raises_a_clear_error_and_writes_nothing(
    db_path: Path,
) -> None:
    db = SessionDB(db_path, policy=ContentionPolicy(patience_s=1.5))
    db.create_session("s1", "cli")
    with lock_held(db_path, 6.0):
        started = time.monotonic()
        with pytest.raises(StoreLockedError) as raised:
            db.append_message("s1", "user", "never lands")
        waited = time.monotonic() - started
    assert 1.5 <= waited < 4.0
    message = str(raised.value)
    assert str(db_path) in message and "locked" in message
    assert raised.value.waited_s >= 1.5
    assert db.get_messages("s1") == []
    assert db.get_session("s1")["message_count"] == 0
    db.close()


def test_per_call_patience_overrides_the_store_policy(db_path: Path) -> None:
    store = Store(db_path)  # 30 s by default
    with lock_held(db_path, 6.0):
        started = time.monotonic()
        with pytest.raises(StoreLockedError), store.write(patience_s=0.5) as uow:
            uow.connection.exec_driver_sql("SELECT 1")
        assert time.monotonic() - started < 3.0
    store.close()


def test_reads_answer_while_another_process_holds_the_write_lock(
    db: SessionDB, db_path: Path
) -> None:
    db.create_session("s1", "cli")
    db.append_message("s1", "user", "searchable words about kubernetes")
    with lock_held(db_path, 5.0):
        started = time.monotonic()
        assert db.get_session("s1")["message_count"] == 1
        assert len(db.get_messages("s1")) == 1
        assert len(db.search_messages("kubernetes")) == 1
        assert time.monotonic() - started < 1.0


def test_a_write_transaction_takes_the_lock_at_begin(db_path: Path) -> None:
    store = Store(db_path)
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    with store.write() as uow:
        uow.connection.exec_driver_sql("SELECT 1")
        # BEGIN IMMEDIATE already holds the reserved lock: nobody else can start writing.
        with pytest.raises(sqlite3.OperationalError) as raised:
            other.execute("BEGIN IMMEDIATE")
        assert is_lock_error(raised.value)
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    other.close()
    store.close()


def test_a_read_transaction_does_not_take_the_write_lock(db_path: Path) -> None:
    store = Store(db_path)
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    with store.read() as uow:
        uow.connection.exec_driver_sql("SELECT COUNT(*) FROM sessions").scalar()
        other.execute("BEGIN IMMEDIATE")  # would raise "database is locked" otherwise
        other.execute("ROLLBACK")
    other.close()
    store.close()


def test_failed_unit_of_work_rolls_back_everything(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    with pytest.raises(RuntimeError), db.store.write() as uow:
        uow.messages.append("s1", MessageIn("assistant", "lost", tool_calls=[{"id": "c"}]))
        uow.connection.execute(
            text("INSERT INTO messages (session_id, role, timestamp) VALUES ('s1', 'user', 1)")
        )
        raise RuntimeError("agent crashed mid-turn")
    assert db.get_session("s1")["message_count"] == 0
    assert db.get_messages("s1") == []


def _driver(uow: object) -> sqlite3.Connection:
    return uow.connection.connection.driver_connection  # type: ignore[attr-defined]


def test_a_core_statement_inside_a_unit_joins_its_transaction(db: SessionDB) -> None:
    # The unit begins on the driver; SQLAlchemy's autobegin must not start a
    # second transaction, and the unit's end must end both views of it.
    db.create_session("s1", "cli")
    with db.store.write() as uow:
        uow.messages.append(
            "s1", MessageIn("user", "prepared")
        )  # prepared statements, on the driver
        uow.connection.execute(
            text("INSERT INTO messages (session_id, role, timestamp) VALUES ('s1', 'user', 1)")
        )
        connection, driver = uow.connection, _driver(uow)
        assert connection.in_transaction() and driver.in_transaction
    assert not connection.in_transaction() and not driver.in_transaction
    assert db.get_session("s1")["message_count"] == 1  # the raw INSERT moved no counter
    assert len(db.get_messages("s1")) == 2


@pytest.mark.parametrize("unit", ["read", "write"])
def test_a_kept_connection_holds_no_transaction_between_units(db: SessionDB, unit: str) -> None:
    # An open transaction between units would pin a WAL snapshot (and, for a
    # writer, the lock) while the agent waits for its model.
    db.create_session("s1", "cli")
    with getattr(db.store, unit)() as uow:
        uow.sessions.get("s1")
        driver = _driver(uow)
    assert not driver.in_transaction
    with db.store.write() as again:
        assert _driver(again) is driver, "the same kept connection"


def test_statements_after_an_explicit_commit_are_committed_at_the_end(db: SessionDB) -> None:
    # uow.commit() inside the block ends the unit's transaction; a Core
    # statement after it starts another, which the end of the block commits too.
    db.create_session("s1", "cli")
    with db.store.write() as uow:
        uow.messages.append("s1", MessageIn("user", "before the commit"))
        uow.commit()
        uow.connection.execute(text("UPDATE sessions SET title = 'later' WHERE id = 's1'"))
        connection, driver = uow.connection, _driver(uow)
    assert not connection.in_transaction() and not driver.in_transaction
    session = db.get_session("s1")
    assert session["message_count"] == 1 and session["title"] == "later"
    db.append_message("s1", "user", "the next unit works")


@pytest.mark.parametrize("through", ["driver", "sqlalchemy"])
def test_a_failed_commit_rolls_back_and_leaves_the_connection_clean(
    db: SessionDB, through: str
) -> None:
    # A deferred foreign key is checked at COMMIT, which then fails and leaves
    # the transaction open in SQLite: the unit must roll it back itself.
    db.create_session("s1", "cli")
    with pytest.raises(IntegrityError), db.store.write() as uow:
        connection, driver = uow.connection, _driver(uow)
        if through == "driver":
            driver.execute("PRAGMA defer_foreign_keys = ON")
        else:
            connection.exec_driver_sql("PRAGMA defer_foreign_keys = ON")
        uow.messages.append("s1", MessageIn("user", "rolled back with the unit"))
        driver.execute(
            "INSERT INTO messages (session_id, role, timestamp) VALUES ('nobody', 'user', 1)"
        )
    assert not driver.in_transaction and not connection.in_transaction()
    assert db.get_session("s1")["message_count"] == 0, "nothing of the failed unit kept"
    assert db.get_messages("s1") == []
    db.append_message("s1", "user", "the next unit works")
    assert db.get_session("s1")["message_count"] == 1


def test_passive_checkpoint_runs_every_n_writes(db_path: Path) -> None:
    # Pages reach the main file only through a checkpoint, so its size tells
    # whether one ran. Closing the first store checkpoints and removes the WAL.
    SessionDB(db_path).close()
    store = Store(db_path, policy=ContentionPolicy(checkpoint_every=10))
    db = SessionDB(store=store)
    db.create_session("s1", "cli")
    big = "x" * 20_000  # several pages per message
    sizes = []
    for i in range(8):  # writes 2..9: none is the 10th
        db.append_message("s1", "user", f"{i} {big}")
        sizes.append(db_path.stat().st_size)
    assert len(set(sizes)) == 1, "no checkpoint may run before the 10th write"
    db.append_message("s1", "user", f"tenth {big}")
    assert db_path.stat().st_size > sizes[-1] + 9 * 20_000
    store.close()


def test_read_units_do_not_count_towards_the_checkpoint(db_path: Path) -> None:
    SessionDB(db_path).close()
    store = Store(db_path, policy=ContentionPolicy(checkpoint_every=3))
    db = SessionDB(store=store)
    db.create_session("s1", "cli")  # write 1
    db.append_message("s1", "user", "x" * 20_000)  # write 2
    size = db_path.stat().st_size
    for _ in range(10):
        db.get_messages("s1")
        db.search_messages("x")
    assert db_path.stat().st_size == size, "reads must not bring the checkpoint closer"
    db.append_message("s1", "user", "y" * 20_000)  # write 3: the checkpoint
    assert db_path.stat().st_size > size + 30_000
    store.close()


def test_contention_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="patience_s"):
        ContentionPolicy(patience_s=-1)
    with pytest.raises(ValueError, match="jitter"):
        ContentionPolicy(jitter_min_s=0.2, jitter_max_s=0.1)
    with pytest.raises(ValueError, match="checkpoint_every"):
        ContentionPolicy(checkpoint_every=0)


@pytest.mark.parametrize(("patience", "expected_ms"), [(0, 0), (0.25, 250), (30, 1000)])
def test_the_busy_timeout_never_outlasts_the_patience(
    db_path: Path, patience: float, expected_ms: int
) -> None:
    """``--patience 0`` used to wait SQLite's whole 1 s busy timeout at the first attempt."""
    store = Store(db_path, policy=ContentionPolicy(patience_s=patience))
    with store.write() as uow:
        assert uow.connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == expected_ms
    store.close()


def test_a_units_own_patience_shortens_the_busy_timeout_of_its_begin(db_path: Path) -> None:
    store = Store(db_path)  # 30 s of patience, a 1 s busy timeout
    with store.read() as uow:
        driver = _driver(uow)
    statements: list[str] = []
    driver.set_trace_callback(statements.append)
    try:
        with lock_held(db_path, 5.0), pytest.raises(StoreLockedError), store.write(patience_s=0.2):
            pass
    finally:
        driver.set_trace_callback(None)
    begins = [i for i, sql in enumerate(statements) if sql == "BEGIN IMMEDIATE"]
    assert begins, statements
    assert statements[: begins[0]] == ["PRAGMA busy_timeout = 200"], statements
    assert statements[-1] == "PRAGMA busy_timeout = 1000", "the connection's own comes back"
    with store.write() as uow:
        assert uow.connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1000
    store.close()


def test_lock_retries_pause_for_random_jitter_within_the_policy(db_path: Path) -> None:
    """The pauses between ``BEGIN IMMEDIATE`` attempts are 20-150 ms and not all equal.

    Equal pauses bring back the convoy the jitter is there to break; no pause
    at all spins on the lock. Both pass every test that only waits for a lock.
    """
    policy = ContentionPolicy(patience_s=0.6, busy_timeout_ms=0)  # every attempt fails at once
    store = Store(db_path, policy=policy)
    with lock_held(db_path, 5.0), pytest.raises(StoreLockedError) as raised, store.write():
        pass
    locked = raised.value
    pauses = locked.pauses_s
    assert len(pauses) == locked.attempts - 1 >= 3, locked
    between = pauses[:-1]  # the last pause is cut short by the deadline
    assert all(policy.jitter_min_s <= p <= policy.jitter_max_s for p in between), pauses
    assert len(set(between)) > 1, "the pauses must differ"
    # Whatever the machine's speed, sleeps of at least 20 ms bound the attempts.
    assert locked.attempts <= policy.patience_s / policy.jitter_min_s + 1
    store.close()


def test_an_extended_busy_code_is_a_lock_error(db_path: Path) -> None:
    """SQLITE_BUSY_SNAPSHOT (517 = 5 | 2 << 8): a reader's snapshot went stale under a writer."""
    SessionDB(db_path).close()
    reader = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    writer = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM sessions").fetchone()  # the snapshot is taken
        writer.execute("INSERT INTO sessions (id, source, started_at) VALUES ('w', 'cli', 1)")
        with pytest.raises(sqlite3.OperationalError) as raised:
            reader.execute("INSERT INTO sessions (id, source, started_at) VALUES ('r', 'cli', 2)")
        # 517 where the library reports extended codes (Python's own), 5 where not (pysqlite3)
        assert raised.value.sqlite_errorcode in (517, sqlite3.SQLITE_BUSY)
        assert is_lock_error(raised.value)
        reader.execute("ROLLBACK")
    finally:
        reader.close()
        writer.close()
