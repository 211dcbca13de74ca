"""Fill ``messages.content_tsv`` and build its indexes on a populated table, appends unblocked.

Revision 0014 on a table that already holds messages: its vectors are
written by ``UPDATE``s of one range of ids at a time, each committed on its
own, so a writer's ``INSERT`` never waits for them (row locks are taken on
the rows of the range only, and appends are new rows); the indexes are built
``CONCURRENTLY``, which takes no lock an ``INSERT`` waits for. Every step can
be run again: a range fills only the rows still without a vector, and an
index left invalid by a failed concurrent build is dropped and built again.
Revision 0021 (a new vector expression) rewrites the vectors the same way,
one committed range at a time, each range writing only the rows whose vector
changes. Each function here runs on a connection in autocommit mode (see
revision 0014).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.postgresql.word_index import VECTOR_COLUMN, vector_of

FILL_BATCH = 20_000
"""Ids per ``UPDATE``: enough to amortise a statement, few enough that its row locks are brief."""


HOLDS_MESSAGES = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() "
    "AND relation = 'messages'::regclass)"
)
"""Whether this transaction already locked ``messages`` (an earlier revision of the same run).

Work on a second connection would then wait for this transaction, which
waits for it: such a run (a whole chain in one transaction) takes the
blocking path instead.
"""


WRITERS_NOW = (
    "SELECT coalesce(array_agg(DISTINCT virtualtransaction), '{}') FROM pg_locks "
    "WHERE relation = 'messages'::regclass AND pid <> pg_backend_pid()"
)
"""The transactions holding or awaiting a lock on ``messages`` at this moment (virtual ids)."""

WRITERS_LEFT = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'virtualxid' AND virtualxid = ANY(:writers)"
)
"""How many of those transactions are still open (each holds its own virtual id until it ends)."""

WAIT_POLL_SECONDS = 0.02


@contextmanager
def beside_migration(bind: Connection) -> Iterator[Connection | None]:
    """A second connection in autocommit mode beside the migration's transaction on ``bind``.

    None when that transaction already holds ``messages`` (see
    :data:`HOLDS_MESSAGES`): the work must then be done in it, blocking.
    """
    if bind.execute(text(HOLDS_MESSAGES)).scalar():
        yield None
        return
    with bind.engine.connect() as other:
        yield other.execution_options(isolation_level="AUTOCOMMIT")


def fill_vectors(
    connection: Connection, batch: int = FILL_BATCH, vector: Callable[[str], str] = vector_of
) -> int:
    """Give every message without a vector its vector, one committed range of ids at a time.

    The range ends at the highest id present when the fill starts: rows
    appended later were given theirs by the trigger. Returns the rows filled.
    """
    return _by_ranges(connection, batch, f"{VECTOR_COLUMN} IS NULL", vector)


def rewrite_vectors(
    connection: Connection, batch: int = FILL_BATCH, vector: Callable[[str], str] = vector_of
) -> int:
    """Give every message whose vector is not ``vector`` of its text that vector, by ranges.

    Run after the trigger function already makes ``vector``: rows appended
    or edited meanwhile get it from the trigger, and the range's condition is
    evaluated again on a row a writer changed first, so no stale vector is
    written. Rows whose text has nothing the two expressions read apart keep
    their row version. Returns the rows rewritten.

    Replacing a function takes no lock on the table, and a transaction that
    already held ``messages`` when it changed may go on calling the old one:
    those are waited for first (:func:`wait_for_writers`), or a row it wrote
    behind the ranges would keep the old vector.
    """
    wait_for_writers(connection)
    return _by_ranges(connection, batch, rewrite_condition(vector), vector)


def rewrite_condition(vector: Callable[[str], str] = vector_of) -> str:
    """The rows whose stored vector is not ``vector`` of their text (missing ones too)."""
    return f"{VECTOR_COLUMN} IS DISTINCT FROM {vector('content')}"


def rewrite_all(vector: Callable[[str], str] = vector_of) -> str:
    """One ``UPDATE`` giving every message that differs ``vector`` of its text (blocking)."""
    setting = f"{VECTOR_COLUMN} = {vector('content')}"
    return f"UPDATE messages SET {setting} WHERE {rewrite_condition(vector)}"


def wait_for_writers(connection: Connection) -> None:
    """Return once every transaction that touched ``messages`` before this call has ended.

    The wait ``CREATE INDEX CONCURRENTLY`` makes, without its lock: writers
    that begin meanwhile are not blocked and are not waited for (they see
    every catalog change committed before they began).
    """
    writers = list(connection.execute(text(WRITERS_NOW)).scalar_one())
    while writers and connection.execute(text(WRITERS_LEFT), {"writers": writers}).scalar_one():
        time.sleep(WAIT_POLL_SECONDS)


def _by_ranges(
    connection: Connection, batch: int, condition: str, vector: Callable[[str], str]
) -> int:
    """``UPDATE`` the rows meeting ``condition``, one committed range of ``batch`` ids at a time."""
    low, high = connection.execute(text("SELECT min(id), max(id) FROM messages")).one()
    written = 0
    if low is None:
        return written
    statement = text(
        f"UPDATE messages SET {VECTOR_COLUMN} = {vector('content')} "
        f"WHERE id BETWEEN :a AND :b AND {condition}"
    )
    start = int(low)
    while start <= int(high):
        done = connection.execute(statement, {"a": start, "b": start + batch - 1})
        written += max(done.rowcount, 0)
        start += batch
    return written


def build_concurrently(connection: Connection, name: str, definition: str) -> None:
    """``CREATE INDEX CONCURRENTLY name ...definition``, first dropping a failed build's leftover.

    ``definition`` is what follows the index name (``ON table USING ...``). A
    valid index of that name is kept as it is.
    """
    valid = connection.execute(
        text(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = :name AND c.relnamespace = current_schema()::regnamespace"
        ),
        {"name": name},
    ).scalar()
    if valid:
        return
    if valid is not None:
        connection.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
    connection.execute(text(f"CREATE INDEX CONCURRENTLY {name} {definition}"))


def drop_concurrently(connection: Connection, name: str) -> None:
    """Drop an index without the exclusive table lock a plain ``DROP INDEX`` takes."""
    connection.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
