"""Operations the Alembic revisions share, written the way the old code migrated.

The old ``sqlite3`` store added columns with ``ALTER TABLE ADD COLUMN`` and
ignored "duplicate column", then bumped ``schema_version``. A file in the
field can therefore carry a column whose version bump never happened (a crash
in between); adding columns only where missing keeps such files upgradable.
Every revision leaves ``schema_version`` at its own number, so the old code
still reads the file correctly after an upgrade or a downgrade.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Column, inspect, text


def is_sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def existing_columns(table: str) -> set[str]:
    return {column["name"] for column in inspect(op.get_bind()).get_columns(table)}


def add_missing_columns(table: str, *columns: Column) -> None:
    present = existing_columns(table)
    for column in columns:
        if column.name not in present:
            op.add_column(table, column)


def drop_columns(table: str, *names: str) -> None:
    """Drop columns in place: ``recreate="never"`` keeps FTS triggers and AUTOINCREMENT.

    A batch *recreate* would copy ``messages`` into a new table, dropping the
    three FTS triggers with the old one and losing the AUTOINCREMENT flag.
    SQLite 3.35+ drops a column natively, which is all a downgrade needs.
    """
    present = existing_columns(table)
    with op.batch_alter_table(table, recreate="never") as batch:
        for name in names:
            if name in present:
                batch.drop_column(name)


def set_schema_version(version: int) -> None:
    """Leave exactly one ``schema_version`` row, holding ``version``."""
    bind = op.get_bind()
    updated = bind.execute(text("UPDATE schema_version SET version = :v"), {"v": version})
    if updated.rowcount == 0:
        bind.execute(text("INSERT INTO schema_version (version) VALUES (:v)"), {"v": version})
