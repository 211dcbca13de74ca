"""The PostgreSQL rules: how units of work begin, wait and retry there.

SQLite serialises writers with one file lock, taken up front by ``BEGIN
IMMEDIATE``; PostgreSQL locks rows, so none of that applies:

* a **write** unit is a plain ``READ COMMITTED`` transaction. Counters are
  changed by ``UPDATE ... SET n = n + :k``, which PostgreSQL re-evaluates on
  the newest row version after waiting for a concurrent writer, so they stay
  exact without any table lock. A write waits for a row lock at most the
  policy's patience (``lock_timeout``, or the unit's own ``patience_s``);
  past it the statement fails and the store raises
  :class:`~hermes_store.errors.StoreLockedError`, as on SQLite;
* a **read** unit is ``REPEATABLE READ READ ONLY``: one snapshot for all its
  statements (search hits and their context agree, like a SQLite reader in
  WAL mode); a read-only transaction never fails to serialize;
* a write unit that PostgreSQL aborts because of a deadlock (SQLSTATE
  40P01) or a serialization failure (40001) is run again from the start,
  after a random 20-150 ms pause, until the patience budget is spent -- see
  :func:`retry_aborted`, which :meth:`~hermes_store.uow.store.Store.transact`
  applies to a whole unit of work;
* the schema upgrade holds a transaction-level advisory lock, so two
  processes opening an empty database do not both create the tables;
* a connection a thread keeps between units is checked before each unit
  (:func:`kept_connection_alive`), so a server restart or a killed backend
  costs the thread no failed call once the server is back.
"""

from __future__ import annotations

import random
import select
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, ExceptionContext
from sqlalchemy.exc import DBAPIError

from hermes_store.backends.durability import Durability
from hermes_store.backends.options import BEGIN_OPTION, PATIENCE_OPTION, READ_OPTION
from hermes_store.backends.postgresql.plans import execute as planned_for_parameters
from hermes_store.errors import InvalidInputError, StoreLockedError, StoreUnavailableError

if TYPE_CHECKING:
    from hermes_store.backends.policy import ContentionPolicy

RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
"""Serialization failure and deadlock: the whole transaction may simply run again."""
FOREIGN_KEY_SQLSTATE = "23503"
"""foreign_key_violation: under READ COMMITTED, a row the unit checked was deleted (or one it
was deleting was given a message) by a transaction that committed between the check and the
write. Run again, the unit's checks see that commit and say so by name."""
FOREIGN_KEY_ATTEMPTS = 3
"""Runs of a unit a foreign key failed: a race does not repeat every time, a rule broken
outright does (its error then goes up as it is)."""
LOCK_TIMEOUT_SQLSTATE = "55P03"
"""lock_not_available: a row lock was not granted within ``lock_timeout``."""

POOLED_PREPARE_SQLSTATES = frozenset({"26000", "42P05"})
"""invalid_sql_statement_name, duplicate_prepared_statement: psycopg's prepared statements
met a transaction pooler that lent another server connection (no ``pool_mode=transaction``)."""

OUT_OF_RANGE_SQLSTATE = "22003"
"""numeric_value_out_of_range: e.g. a token counter past 2**31 - 1 in an INTEGER column."""

MIGRATION_LOCK_KEY = 0x4E524D53  # arbitrary, constant: "the hermes_store schema upgrade"

_T = TypeVar("_T")


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a (wrapped) psycopg error, or None for anything else."""
    original = error.orig if isinstance(error, DBAPIError) else error
    return getattr(original, "sqlstate", None)


LOCK_TIMEOUT_MAX_MS = 2**31 - 1
"""The largest ``lock_timeout`` the server takes: a longer patience waits this long a lock."""


def _milliseconds(seconds: float) -> int:
    # lock_timeout = 0 means "wait forever" in PostgreSQL; patience 0 means "do not wait".
    return max(1, int(min(seconds * 1000, LOCK_TIMEOUT_MAX_MS)))


POOL_MODE_OPTION = "pool_mode"
"""URL query option of ours (``?pool_mode=transaction``): the server is reached through a
pooler that lends a server connection per transaction (PgBouncer's transaction pooling)."""


def create_postgresql_engine(
    url: URL,
    policy: ContentionPolicy,
    durability: Durability = Durability.FULL,
    *,
    read_only: bool = False,
) -> Engine:
    """An engine on ``url`` whose units of work follow the rules of this module.

    Nothing is set for the session, only for each transaction, so the same
    engine works straight on the server and behind a transaction pooler: a
    write unit's lock budget and commit durability are set in its own
    transaction (:func:`_settings_rule`), and a read-only store's transactions
    begin ``READ ONLY``. ``?pool_mode=transaction`` in the URL (ours, taken out
    before connecting) also turns off psycopg's server-side prepared
    statements, which a transaction pooler cannot keep across transactions.
    """
    connect_args: dict[str, Any] = {}
    mode = url.query.get(POOL_MODE_OPTION)
    if mode is not None:
        if mode not in ("transaction", "session"):
            raise InvalidInputError(
                f"pool_mode={mode!r} in the PostgreSQL URL: it may be 'transaction' (PgBouncer's "
                "transaction pooling) or 'session'"
            )
        url = url.difference_update_query([POOL_MODE_OPTION])
        if mode == "transaction":
            connect_args["prepare_threshold"] = None
    engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    settings = _settings_rule(policy, durability)
    engine = engine.execution_options(**{BEGIN_OPTION: settings})
    _install_rules(engine, policy, read_only=read_only)
    return engine


def _settings_rule(
    policy: ContentionPolicy, durability: Durability
) -> Callable[[Connection, bool, float | None], None]:
    """The settings a write unit gives its own transaction: one statement, transaction-local."""
    commit = durability.postgresql_synchronous_commit

    def settings(connection: Connection, write: bool, patience_s: float | None) -> None:
        if not write:
            return
        wait = _milliseconds(policy.patience_s if patience_s is None else patience_s)
        connection.exec_driver_sql(
            f"SELECT set_config('lock_timeout', '{wait}', true), "
            f"set_config('synchronous_commit', '{commit}', true)"
        )

    return settings


def refused_input(error: BaseException) -> str | None:
    """Why PostgreSQL refused the caller's value, when the driver error says so; else None.

    psycopg refuses any string holding U+0000 before sending it (PostgreSQL
    text cannot store it); numeric_value_out_of_range: INTEGER columns are
    32-bit there, and a DOUBLE PRECISION sum that overflows is refused rather
    than stored as infinity. Both are the caller's input, so they are said so
    -- for statements through the engine and for rows streamed with ``COPY``,
    which passes no engine rule, alike.
    """
    import psycopg  # the optional extra: imported only for a PostgreSQL engine

    if isinstance(error, psycopg.DataError) and "NUL (0x00)" in str(error):
        return "text with a NUL character (U+0000) cannot be stored in or looked up from PostgreSQL"
    if getattr(error, "sqlstate", None) == OUT_OF_RANGE_SQLSTATE:
        return (
            f"a number is out of range on PostgreSQL ({str(error).splitlines()[0]}; "
            "token counters and token_count are 32-bit INTEGER there, costs and their "
            "sums DOUBLE PRECISION)"
        )
    return None


def _install_rules(engine: Engine, policy: ContentionPolicy, *, read_only: bool) -> None:
    import psycopg  # the optional extra: imported only for a PostgreSQL engine

    @event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        original = context.original_exception
        refused = refused_input(original)
        if refused is not None:
            raise InvalidInputError(f"{refused}; nothing was changed") from original
        # Our own statements name no prepared statement: these come from psycopg's
        # automatic ones behind a transaction pooler. Nothing of the call was committed.
        if getattr(original, "sqlstate", None) in POOLED_PREPARE_SQLSTATES:
            where = engine.url.render_as_string(hide_password=True)
            raise StoreUnavailableError(
                f"{where}: a prepared statement was lost between transactions "
                f"({str(original).splitlines()[0]}): the server is reached through a "
                "transaction pooler (PgBouncer's pool_mode = transaction); add "
                "?pool_mode=transaction to the URL; nothing was written"
            ) from original
        # A row lock not granted within lock_timeout: the patience ran out, as on SQLite.
        if getattr(original, "sqlstate", None) == LOCK_TIMEOUT_SQLSTATE:
            options = context.connection.get_execution_options() if context.connection else {}
            patience = options.get(PATIENCE_OPTION)
            waited = float(policy.patience_s if patience is None else patience)
            where = engine.url.render_as_string(hide_password=True)
            raise StoreLockedError(where, waited, 1) from original

    event.listen(engine, "do_execute", planned_for_parameters)

    snapshot = (psycopg.IsolationLevel.REPEATABLE_READ, True)
    # READ COMMITTED; read-write unless the store is read-only.
    server_default = (None, True if read_only else None)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Sends nothing: psycopg opens the transaction at the first statement with a
        # BEGIN that carries these (one round trip, and an error there is SQLAlchemy's
        # to see: a statement run from this hook would escape as a raw psycopg error).
        # SQLAlchemy types the driver's connection as any driver's, maybe detached.
        dbapi_connection = cast("psycopg.Connection[Any]", connection.connection.dbapi_connection)
        wanted = snapshot if connection.get_execution_options().get(READ_OPTION) else server_default
        if (dbapi_connection.isolation_level, dbapi_connection.read_only) != wanted:
            dbapi_connection.isolation_level, dbapi_connection.read_only = wanted


def kept_connection_alive(connection: Connection) -> bool:
    """False when the server hung up on an idle kept connection: a restart, a killed backend.

    A connection a thread keeps between units is not checked out of the pool
    again, so the pool's pre-ping never sees it. A server that ends a session
    sends its last words and closes the socket; so a quiet socket costs one
    ``select`` and no round trip, and only one with something to read is pinged.
    """
    if connection.closed or connection.invalidated:
        return True  # nothing to test: SQLAlchemy reconnects an invalidated one itself
    dbapi_connection = connection.connection.dbapi_connection
    if dbapi_connection is None or dbapi_connection.closed or dbapi_connection.broken:
        return False
    try:
        readable, _, _ = select.select([dbapi_connection.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    if not readable:
        return True
    try:
        return bool(connection.dialect.do_ping(dbapi_connection))
    except Exception:  # any failure to answer means: do not use it
        return False


def lock_schema(connection: Connection) -> None:
    """Serialise schema upgrades: held until the migration's transaction ends."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


def retry_aborted(
    run: Callable[[], _T],
    policy: ContentionPolicy,
    where: str,
    first: DBAPIError | None = None,
) -> _T:
    """``run()``, run again when PostgreSQL aborted its transaction (deadlock, serialization,
    a foreign key a concurrent commit broke: :data:`FOREIGN_KEY_SQLSTATE`).

    ``run`` is exactly one unit of work whose arguments were checked before it
    began, and a failed unit left the database as it was, so running it again
    is safe; the retries pause 20-150 ms (jitter) and stop at the policy's
    patience (then StoreLockedError). SQLite never raises these (its writers
    queue for the file lock at ``BEGIN IMMEDIATE``): there this costs one ``try``.
    ``first`` is the error of an attempt the caller already made.
    """
    if first is None:
        try:
            return run()
        except DBAPIError as failed:
            first = failed
    if sqlstate(first) is None:
        raise first
    started = time.monotonic()
    deadline = started + policy.patience_s
    attempts = 1
    error = first
    while True:
        state = sqlstate(error)
        now = time.monotonic()
        if state == FOREIGN_KEY_SQLSTATE:
            if attempts >= FOREIGN_KEY_ATTEMPTS:
                raise error
        elif state not in RETRYABLE_SQLSTATES:
            raise error
        if now >= deadline:
            raise StoreLockedError(where, now - started, attempts) from error
        time.sleep(min(random.uniform(policy.jitter_min_s, policy.jitter_max_s), deadline - now))
        attempts += 1
        try:
            return run()
        except DBAPIError as again:
            error = again
