"""The SQLite rules, in one place: how connections open, transactions begin, WAL is kept.

The rules come from the design document and from field reports. They are
installed as SQLAlchemy events; a unit of work applies the same rules itself
through :class:`SqliteRules`, which each connection carries:

* on connect: WAL journal, foreign keys on, a short (1 s) busy timeout, the
  store's durability (``synchronous``, see :mod:`hermes_store.backends.durability`), and
  the driver's own transaction handling off so that we decide how each
  transaction begins (SQLAlchemy's "pysqlite serializable" recipe);
* on begin (a unit of work's, or SQLAlchemy's own): ``BEGIN IMMEDIATE`` for
  writers, so lock contention shows up at the start of a transaction instead
  of as a failed upgrade half-way through;
  plain deferred ``BEGIN`` for readers, which in WAL never wait for writers.
  A locked database is retried with random jitter (20-150 ms) until a time
  budget runs out -- jitter breaks the convoy of writers retrying in step;
* on connect, too: a decoder for stored text that is not UTF-8
  (:mod:`hermes_store.backends.sqlite.stored_text`), and which files the
  connection opened (database, ``-wal``, ``-shm``), so that a file replaced
  under the store is noticed before the next unit of work
  (:mod:`hermes_store.backends.sqlite.file_identity`);
* after every 50 successful write commits: a PASSIVE WAL checkpoint, which
  never blocks, so the ``-wal`` file does not grow without bound (run by the
  unit of work right after its commit, see :meth:`SqliteRules.after_write_commit`;
  a checkpoint that fails is logged and retried, and never fails the write).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
import urllib.parse
from pathlib import Path
from typing import Any, cast

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine

from hermes_store.backends.durability import Durability
from hermes_store.backends.location import sqlite_file
from hermes_store.backends.options import PATIENCE_OPTION, READ_OPTION
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.sqlite import library, stored_text
from hermes_store.backends.sqlite.backend import SQLITE_RULES_KEY
from hermes_store.backends.sqlite.file_identity import OpenedFiles
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.private_files import (
    UnsafeDatabasePathError,
    require_fit_replacement,
)
from hermes_store.errors import StoreCorruptError, StoreLockedError, StoreReplacedError

_LOCK_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_log = logging.getLogger(__name__)
_SQLITE_RULES = SQLITE_RULES_KEY
OPENED_FILES = "hermes_opened_files"
"""Connection info: the files a connection opened (``file_identity.OpenedFiles``)."""


def is_lock_error(error: BaseException) -> bool:
    """True when SQLite refused because another connection holds a lock."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _LOCK_CODES
    message = str(error).lower()
    return "locked" in message or "busy" in message


def create_sqlite_engine(
    url: URL, policy: ContentionPolicy, durability: Durability, *, read_only: bool = False
) -> Engine:
    """An engine for a SQLite ``url`` with the rules of this module installed.

    ``read_only`` opens the file with ``mode=ro`` (see :func:`read_only_uri`):
    its connections can neither write nor take the write lock.
    """
    timeout = policy.busy_timeout_for(policy.patience_s) / 1000
    path = sqlite_file(url)
    if read_only and path is not None:
        uri = read_only_uri(path)
        engine = create_engine(
            url,
            module=sqlite3,
            creator=lambda: sqlite3.connect(
                uri, uri=True, check_same_thread=False, timeout=timeout
            ),
        )
    else:
        engine = create_engine(
            url, module=sqlite3, connect_args={"check_same_thread": False, "timeout": timeout}
        )
    # Absolute for the replaced-file check: SQLite keeps the full path it opened, and a
    # process that changes directory must not see its own file as "moved away".
    opened = os.path.abspath(path) if path is not None else None
    _install_sqlite_rules(
        engine, policy, durability, str(path or url.database), opened, read_only=read_only
    )
    return engine


def read_only_uri(path: Path) -> str:
    """The SQLite URI that reads ``path`` without ever writing it.

    ``mode=ro`` opens the file read-only. A WAL database also needs its
    ``-shm`` (SQLite creates it if it can); in a folder this process cannot
    write, with no ``-wal`` beside the file, no writer can be running either
    (it would need to create one), so the file is opened ``immutable=1``:
    read as it is, without the shared-memory index.
    """
    quoted = urllib.parse.quote(str(path.resolve()))
    uri = f"file:{quoted}?mode=ro"
    wal = Path(f"{path}-wal")
    if not os.access(path.parent, os.W_OK) and not wal.exists():
        uri += "&immutable=1"
    return uri


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

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    """The driver's errors, which a unit of work catches where it ends its transaction."""

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
        started = time.monotonic()
        if patience_s is None:
            # The policy's own patience, which the busy timeout already fits: the
            # first attempt needs no timeout change, and a writer that gets the
            # lock at once (nearly every one) none of the retry loop's set-up.
            first: BaseException | None = _try_begin_immediate(dbapi_connection)
            if first is None:
                return
            patience = self.policy.patience_s
        else:
            patience, first = float(patience_s), None
        _begin_immediate(
            dbapi_connection,
            self.policy,
            patience,
            self.database,
            self.busy_timeout_ms,
            started=started,
            failed_first=first,
        )

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


def _owner(path: str | None) -> int | None:
    """Who owns the file the store opens (it exists by now, unless read-only and missing)."""
    if path is None:
        return None
    try:
        return os.stat(path).st_uid
    except FileNotFoundError:
        return None


def sqlite_rules(connection: Connection) -> SqliteRules | None:
    """The rules of a SQLite engine's connection; None on other backends."""
    return connection.info.get(_SQLITE_RULES)


def _install_sqlite_rules(
    engine: Engine,
    policy: ContentionPolicy,
    durability: Durability,
    database: str,
    opened_path: str | None,
    *,
    read_only: bool = False,
) -> None:
    rules = SqliteRules(policy, database)
    synchronous = f"PRAGMA synchronous = {durability.sqlite_synchronous}"
    owner = _owner(opened_path)
    decode = stored_text.decoder(database, opened_path)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        if opened_path is not None:
            # Before anything is set (journal_mode = WAL writes the header): a file swapped
            # in at the path since the store opened it must pass opening's checks.
            try:
                require_fit_replacement(Path(opened_path), owner)
            except UnsafeDatabasePathError as error:
                dbapi_connection.close()
                raise StoreReplacedError(f"{error}; nothing was written to it") from None
        try:
            _prepare(dbapi_connection, record)
        except UnicodeDecodeError as error:
            raise StoreCorruptError(database, stored_text.undecodable_schema(error)) from error

    def _prepare(dbapi_connection: sqlite3.Connection, record: Any) -> None:
        # Autocommit at the driver level: transactions begin only where we say.
        dbapi_connection.isolation_level = None
        # A text that is not UTF-8 reads as text with U+FFFD, not as an error.
        dbapi_connection.text_factory = decode
        dbapi_connection.execute(f"PRAGMA busy_timeout = {rules.busy_timeout_ms}")
        dbapi_connection.execute("PRAGMA foreign_keys = ON")
        # Set even for FULL: a build whose default is NORMAL must not weaken it silently.
        dbapi_connection.execute(synchronous)
        (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
        library.warn_once(database)
        if (
            not read_only
            and not library.AFFECTED
            and str(mode).lower() != "wal"
            and not _keeps_its_journal_mode(dbapi_connection)
        ):
            # Asking only when needed keeps the open of a current database read-only.
            # A library with the WAL-reset bug leaves the file in the mode it has:
            # a new one stays out of WAL, one already in WAL cannot be taken out
            # while other processes may hold it.
            dbapi_connection.execute("PRAGMA journal_mode = WAL")
        record.info[_SQLITE_RULES] = rules
        if opened_path is not None:  # the files it now holds (journal_mode opened the WAL)
            record.info[OPENED_FILES] = OpenedFiles.at(opened_path)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        dbapi_connection = cast(sqlite3.Connection, connection.connection.driver_connection)
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


def _keeps_its_journal_mode(dbapi_connection: sqlite3.Connection) -> bool:
    """True for a file whose journal mode is not ours to change.

    A file at the agent's own schema versions (7 and later): its journal mode
    is the agent's choice -- its v25 keeps new files out of WAL on SQLite
    builds with the WAL-reset bug, and never switches a file other processes
    may hold open. A file that holds tables but no ``schema_version`` is not
    a session store at all, and is refused unchanged. Asked only of a file
    not in WAL already: the open of a current file pays nothing for it.
    """
    from hermes_store.schema.state import DOCUMENT_VERSION

    try:
        row = dbapi_connection.execute("SELECT MAX(version) FROM schema_version").fetchone()
    except sqlite3.Error:
        # No schema_version: a new, empty file gets WAL; anything else is foreign.
        return (
            dbapi_connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
        )
    try:
        return row is not None and row[0] is not None and int(row[0]) > DOCUMENT_VERSION
    except (TypeError, ValueError):
        return False


def _try_begin_immediate(dbapi_connection: sqlite3.Connection) -> BaseException | None:
    """``BEGIN IMMEDIATE`` once: None when it began, the lock error when another writer holds it.

    Any other error is raised as it is.
    """
    try:
        dbapi_connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if not is_lock_error(error):
            raise
        return error
    return None


def _begin_immediate(
    dbapi_connection: sqlite3.Connection,
    policy: ContentionPolicy,
    patience_s: float,
    database: str,
    busy_timeout_ms: int,
    *,
    started: float,
    failed_first: BaseException | None = None,
) -> None:
    """``BEGIN IMMEDIATE``, retried with jitter until ``patience_s`` is spent, and no longer.

    Each attempt waits in SQLite's busy handler as well: its timeout (the
    connection's ``busy_timeout_ms``) is cut to what is left of the patience
    whenever that is less, and set back after. Left whole, an attempt begun
    near the end would wait a full busy timeout past the patience.
    ``failed_first`` is the lock error of an attempt already made at
    ``started`` with the whole busy timeout (:meth:`SqliteRules.begin`).
    """
    deadline = started + patience_s
    attempts = 0
    pauses: list[float] = []
    busy_ms = busy_timeout_ms
    left_ms = int(min(patience_s * 1000, busy_timeout_ms))  # only compared with busy_ms
    try:
        while True:
            if failed_first is not None:
                error, failed_first = failed_first, None
            else:
                if left_ms < busy_ms:
                    busy_ms = left_ms
                    dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_ms}")
                locked = _try_begin_immediate(dbapi_connection)
                if locked is None:
                    return
                error = locked
            attempts += 1
            now = time.monotonic()
            if now >= deadline:
                raise StoreLockedError(database, now - started, attempts, tuple(pauses)) from error
            pause = min(random.uniform(policy.jitter_min_s, policy.jitter_max_s), deadline - now)
            pauses.append(pause)
            time.sleep(pause)
            left_ms = max(0, int(min((deadline - time.monotonic()) * 1000, busy_timeout_ms)))
    finally:
        if busy_ms != busy_timeout_ms:
            dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
