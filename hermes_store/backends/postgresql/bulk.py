"""Loading many rows into PostgreSQL at once (``hermes-store copy``): COPY, indexes, ANALYZE.

A multi-row ``INSERT`` makes the server parse, plan and check every row as
a statement parameter; the ``COPY`` protocol streams rows in one statement,
which leaves the server only the work it must do per row: the stored
tsvector, the heap, the b-tree and GIN index entries. The GIN indexes
(words and trigrams) are the most of that work, and an index built once
from all the rows (sorted, in bulk) costs much less than the same entries
added row by row; so a large copy drops them first and builds both at the
end, each on its own connection, at once. A copy interrupted in between
leaves them missing: the next run builds them at its end, and ``hermes-store
check --repair`` rebuilds them too.

``COPY`` cannot skip a row that is already there (no ``ON CONFLICT``): the
rows of a batch whose ids the target already holds are left out before it
is sent, read from the primary key in the batch's id range, which keeps a
re-run exact after a crash mid-copy (each batch is one transaction: all of
it is there, or none).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from hermes_store.backends.postgresql.engine import refused_input
from hermes_store.backends.postgresql.health import SEARCH_INDEXES
from hermes_store.errors import InvalidInputError

BUILD_MEMORY = "256MB"
"""``maintenance_work_mem`` for each index build (the server's default is 64MB)."""

_PRESENT = text("SELECT id FROM messages WHERE id BETWEEN :p_first AND :p_last")


def copy_new_messages(
    connection: Connection, columns: Sequence[str], rows: list[dict[str, Any]]
) -> int:
    """COPY the ``rows`` (in id order) whose ids ``messages`` lacks; returns how many."""
    if not rows:
        return 0
    present = set(
        connection.execute(_PRESENT, {"p_first": rows[0]["id"], "p_last": rows[-1]["id"]}).scalars()
    )
    fresh = [row for row in rows if row["id"] not in present]
    if not fresh:
        return 0
    names = ", ".join(columns)
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with driver.cursor() as cursor, cursor.copy(f"COPY messages ({names}) FROM STDIN") as copy:
            for row in fresh:
                copy.write_row([row[name] for name in columns])
    except Exception as error:
        # COPY passes no engine rule: a value PostgreSQL cannot hold reached the
        # CLI as the driver's raw error and a traceback. The batch rolls back.
        refused = refused_input(error)
        if refused is None:
            raise
        raise InvalidInputError(
            f"messages {fresh[0]['id']} to {fresh[-1]['id']} (one batch) were not copied: "
            f"{refused}; the batches before it were, and a run again skips them"
        ) from error
    return len(fresh)


def drop_search_indexes(connection: Connection) -> None:
    """Drop the GIN indexes before a bulk load (:func:`build_search_indexes` builds them)."""
    for name in SEARCH_INDEXES:
        connection.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")


def build_search_indexes(engine: Engine) -> None:
    """Build every missing search index, each on its own connection, all at once."""
    errors: list[BaseException] = []

    def build(ddl: str) -> None:
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
                connection.exec_driver_sql(
                    ddl.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
                )
        except BaseException as error:  # raised again in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=build, args=(ddl,)) for ddl in SEARCH_INDEXES.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def analyze(connection: Connection) -> None:
    """Statistics for the planner, so the first queries after a load plan well."""
    connection.exec_driver_sql("ANALYZE sessions")
    connection.exec_driver_sql("ANALYZE messages")
