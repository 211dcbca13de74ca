"""Operations the Alembic revisions share, written the way the old code migrated.

The old ``sqlite3`` store added columns with ``ALTER TABLE ADD COLUMN`` and
ignored "duplicate column", then bumped ``schema_version``. A file in the
field can therefore carry a column whose version bump never happened (a crash
in between); adding columns only where missing keeps such files upgradable.
Every revision leaves ``schema_version`` at its own number, so the old code
still reads the file correctly after an upgrade or a downgrade.

Offline (``alembic upgrade head --sql``) there is no database to look at:
columns are then added or dropped unconditionally, and the SQL is for a file
known to be at the starting revision.
"""

from __future__ import annotations

from typing import Any

from alembic import context, op
from sqlalchemy import Column, inspect

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import SchemaError


def is_sqlite() -> bool:
    return op.get_context().dialect.name == "sqlite"


def existing_columns(table: str) -> set[str] | None:
    """The table's column names, or None offline, where nothing can be inspected."""
    if context.is_offline_mode():
        return None
    return {column["name"] for column in inspect(op.get_bind()).get_columns(table)}


def add_missing_columns(table: str, *columns: Column[Any]) -> None:
    present = existing_columns(table)
    for column in columns:
        if present is None or column.name not in present:
            op.add_column(table, column)


def drop_columns(table: str, *names: str) -> None:
    """Drop columns in place: ``recreate="never"`` keeps FTS triggers and AUTOINCREMENT.

    A batch *recreate* would copy ``messages`` into a new table, dropping the
    three FTS triggers with the old one and losing the AUTOINCREMENT flag.
    SQLite 3.35+ drops a column natively, which is all a downgrade needs.
    """
    if is_sqlite() and sqlite3.sqlite_version_info < (3, 35, 0):
        raise SchemaError(
            f"downgrading needs SQLite 3.35 or later for DROP COLUMN; this Python has "
            f"{sqlite3.sqlite_version}, and a table rebuild would lose the FTS triggers"
        )
    present = existing_columns(table)
    with op.batch_alter_table(table, recreate="never") as batch:
        for name in names:
            if present is None or name in present:
                batch.drop_column(name)


def set_schema_version(version: int) -> None:
    """Leave ``schema_version`` at ``version``: what the old code reads on open.

    UPDATE every row, then INSERT only into an empty table: two statements
    that need no round trip, so they work offline too.
    """
    number = int(version)  # inlined as a literal: offline SQL has no parameters
    op.execute(f"UPDATE schema_version SET version = {number}")
    op.execute(
        f"INSERT INTO schema_version (version) SELECT {number} "
        "WHERE NOT EXISTS (SELECT 1 FROM schema_version)"
    )
