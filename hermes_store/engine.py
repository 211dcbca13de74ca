"""Engine factory and the SQLite rules, in one place.

The rules come from the design document and from field reports. They are
installed as SQLAlchemy events; a unit of work applies the same rules itself
through :class:`SqliteRules`, which each connection carries:

* on connect: WAL journal, foreign keys on, a short (1 s) busy timeout, the
  store's durability (``synchronous``, see :mod:`hermes_store.durability`), and
  the driver's own transaction handling off so that we decide how each
  transaction begins (SQLAlchemy's "pysqlite serializable" recipe);
* on begin (a unit of work's, or SQLAlchemy's own): ``BEGIN IMMEDIATE`` for
  writers, so lock contention shows up at the start of a transaction instead
  of as a failed upgrade half-way through;
  plain deferred ``BEGIN`` for readers, which in WAL never wait for writers.
  A locked database is retried with random jitter (20-150 ms) until a time
  budget runs out -- jitter breaks the convoy of writers retrying in step;
* after every 50 successful write commits: a PASSIVE WAL checkpoint, which
  never blocks, so the ``-wal`` file does not grow without bound (run by the
  unit of work right after its commit, see :meth:`SqliteRules.after_write_commit`;
  a checkpoint that fails is logged and retried, and never fails the write).
"""

from __future__ import annotations

import itertools
import logging
import random
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine

from .durability import Durability
from .errors import InvalidInputError, StoreLockedError
from .location import sqlite_file
from .validation import int_arg, number_arg

READ_OPTION = "hermes_read"
"""Execution option: the transaction only reads, so it must not take the write lock."""
PATIENCE_OPTION = "hermes_patience"
"""Execution option: seconds this transaction may wait for the write lock."""

_LOCK_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_log = logging.getLogger(__name__)
_SQLITE_RULES = "hermes_sqlite_rules"


@dataclass(frozen=True)
class ContentionPolicy:
    """How long and how a writer waits for the lock; the document's numbers by default.

    ``patience_s`` is a time budget rather than the document's 15 attempts:
    15 x 20-150 ms is about 1.3 s, and a sibling running VACUUM or a large
    checkpoint holds the lock for longer than that.
    """

    patience_s: float = 30.0
    jitter_min_s: float = 0.020
    jitter_max_s: float = 0.150
    busy_timeout_ms: int = 1000
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        # InvalidInputError is a ValueError: a policy that makes no sense opens nothing.
        number_arg("patience_s", self.patience_s, minimum=0.0)
        number_arg("jitter_min_s", self.jitter_min_s, minimum=0.0)
        number_arg("jitter_max_s", self.jitter_max_s, minimum=0.0)
        if not self.jitter_min_s <= self.jitter_max_s:
            raise InvalidInputError(
                f"need 0 <= jitter_min_s <= jitter_max_s, got {self.jitter_min_s}, "
                f"{self.jitter_max_s}"
            )
        int_arg("busy_timeout_ms", self.busy_timeout_ms, minimum=0)
        int_arg("checkpoint_every", self.checkpoint_every, minimum=1)

    def busy_timeout_for(self, patience_s: float) -> int:
        """The busy timeout (ms) a wait of ``patience_s`` may use: never more than the patience.

        SQLite's busy handler waits inside one attempt; left at 1 s, a
        patience of 0 would still wait a whole second before failing.
        """
        return min(self.busy_timeout_ms, int(patience_s * 1000))


def is_lock_error(error: BaseException) -> bool:
    """True when SQLite refused because another connection holds a lock."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _LOCK_CODES
    message = str(error).lower()
    return "locked" in message or "busy" in message


def create_store_engine(
    url: URL,
    policy: ContentionPolicy | None = None,
    durability: Durability | str = Durability.FULL,
) -> Engine:
    """An engine for ``url``; SQLite engines get the rules of this module.

    PostgreSQL engines get theirs from :mod:`hermes_store.postgres`.
    ``durability`` is checked first, so a wrong value opens nothing.
    """
    policy = policy or ContentionPolicy()
    durability = Durability.of(durability)
    if url.get_backend_name() == "postgresql":
        from .postgres import create_postgresql_engine

        return create_postgresql_engine(url, policy, durability)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    busy_ms = policy.busy_timeout_for(policy.patience_s)
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": busy_ms / 1000}
    )
    _install_sqlite_rules(engine, policy, durability, str(sqlite_file(url) or url.database))
    return engine


class _CheckpointClock:
    """Counts write commits across the engine's connections and says when to checkpoint.

    ``next`` on an ``itertools.count`` is atomic under the GIL, so threads
    sharing the engine need no lock for it on every commit. A checkpoint that
    failed is overdue: the next commit tries again instead of waiting for the
    next multiple, so a disk that has room again gets its WAL moved in soon.
    """

    def __init__(self, every: int) -> None:
        self._every = every
        self._commits = itertools.count(1)
        self.overdue = False

    def tick(self) -> bool:
        return next(self._commits) % self._every == 0 or self.overdue


class SqliteRules:
    """How one engine's SQLite connections begin, and when they checkpoint.

    Carried in every connection's pool record (``connection.info``), so a unit
    of work can begin and end its transaction on the driver itself -- a
    ``BEGIN IMMEDIATE`` and a ``COMMIT`` cost less than SQLAlchemy's
    transaction bookkeeping around them, which an append would otherwise pay
    inside and around the write lock. Statements SQLAlchemy runs on its own
    (migrations, ``engine.connect()``) begin through the ``begin`` event,
    which follows the same rules.
    """

    __slots__ = ("_clock", "busy_timeout_ms", "database", "policy")

    def __init__(self, policy: ContentionPolicy, database: str) -> None:
        self.policy = policy
        self.database = database
        self.busy_timeout_ms = policy.busy_timeout_for(policy.patience_s)
        """Every connection's busy timeout: the policy's, cut to its patience."""
        self._clock = _CheckpointClock(policy.checkpoint_every)

    def begin(
        self, dbapi_connection: sqlite3.Connection, *, write: bool, patience_s: float | None
    ) -> None:
        """A deferred ``BEGIN`` for readers; ``BEGIN IMMEDIATE`` within the patience for writers.

        A unit whose own patience is shorter than the connection's busy timeout
        waits at most that long: the busy timeout is cut for its ``BEGIN
        IMMEDIATE`` attempts and set back right after.
        """
        if not write:
            dbapi_connection.execute("BEGIN")
            return
        if patience_s is None:
            _begin_immediate(dbapi_connection, self.policy, self.policy.patience_s, self.database)
            return
        busy_ms = self.policy.busy_timeout_for(patience_s)
        if busy_ms >= self.busy_timeout_ms:
            _begin_immediate(dbapi_connection, self.policy, float(patience_s), self.database)
            return
        dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_ms}")
        try:
            _begin_immediate(dbapi_connection, self.policy, float(patience_s), self.database)
        finally:
            dbapi_connection.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")

    def after_write_commit(self, dbapi_connection: sqlite3.Connection) -> None:
        """After a write commit: every Nth one runs the PASSIVE checkpoint.

        Run once the transaction has committed (a checkpoint inside it could
        not copy its pages). PASSIVE never waits for readers or writers.

        It never raises: the write is already in the WAL, durable and visible,
        and a caller told it had failed would write it again. A checkpoint
        that fails (a full disk, an I/O error) is logged and retried at the
        next commit; until one succeeds the WAL only grows, which loses nothing.
        """
        if not self._clock.tick():
            return
        try:
            dbapi_connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as error:
            if not self._clock.overdue:
                _log.warning(
                    "WAL checkpoint of %s failed (%s); the write committed, and the "
                    "checkpoint is retried after the next commit",
                    self.database,
                    error,
                )
            self._clock.overdue = True
            return
        if self._clock.overdue:
            _log.info("WAL checkpoint of %s succeeded again", self.database)
            self._clock.overdue = False


def sqlite_rules(connection: Connection) -> SqliteRules | None:
    """The rules of a SQLite engine's connection; None on other backends."""
    return connection.info.get(_SQLITE_RULES)


def _install_sqlite_rules(
    engine: Engine, policy: ContentionPolicy, durability: Durability, database: str
) -> None:
    rules = SqliteRules(policy, database)
    synchronous = f"PRAGMA synchronous = {durability.sqlite_synchronous}"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        # Autocommit at the driver level: transactions begin only where we say.
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {rules.busy_timeout_ms}")
        dbapi_connection.execute("PRAGMA foreign_keys = ON")
        # Set even for FULL: a build whose default is NORMAL must not weaken it silently.
        dbapi_connection.execute(synchronous)
        (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() != "wal":
            # Asking only when needed keeps the open of a current database read-only.
            dbapi_connection.execute("PRAGMA journal_mode = WAL")
        record.info[_SQLITE_RULES] = rules

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        dbapi_connection = connection.connection.driver_connection
        if dbapi_connection.in_transaction:
            # A unit of work began this transaction on the driver; SQLAlchemy is
            # only catching up (a Core statement run inside the unit).
            return
        options = connection.get_execution_options()
        rules.begin(
            dbapi_connection,
            write=not options.get(READ_OPTION),
            patience_s=options.get(PATIENCE_OPTION),
        )


def _begin_immediate(
    dbapi_connection: sqlite3.Connection,
    policy: ContentionPolicy,
    patience_s: float,
    database: str,
) -> None:
    """``BEGIN IMMEDIATE``, retried with jitter until ``patience_s`` is spent."""
    started = time.monotonic()
    deadline = started + patience_s
    attempts = 0
    pauses: list[float] = []
    while True:
        attempts += 1
        try:
            dbapi_connection.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as error:
            if not is_lock_error(error):
                raise
            now = time.monotonic()
            if now >= deadline:
                raise StoreLockedError(database, now - started, attempts, tuple(pauses)) from error
            pause = min(random.uniform(policy.jitter_min_s, policy.jitter_max_s), deadline - now)
            pauses.append(pause)
            time.sleep(pause)
