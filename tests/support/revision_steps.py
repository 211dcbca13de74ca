"""One step of our revision chain on a fresh file, with the schema before and after it.

Each revision's test asks the same first questions -- what the step adds or
changes, that ``schema_version`` stays 6, that ``alembic_version`` moved --
before its own; the answers come from here, as ``sqlite_master`` rows.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from hermes_store import Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import upgrade

SchemaRows = set[tuple[str, str, str | None]]


def schema_rows(path: Path) -> SchemaRows:
    """Every object of the file as ``(type, name, sql)``."""
    with closing(sqlite3.connect(path)) as raw:
        return set(raw.execute("SELECT type, name, sql FROM sqlite_master"))


def step(path: Path, before: str, after: str) -> tuple[Store, SchemaRows, SchemaRows]:
    """A new file at ``before``, then upgraded to ``after``: the store and both schemas.

    The store is left open for the caller's downgrade (and ``close()``).
    """
    store = Store(path, migrate=False)
    upgrade(store.engine, before)
    at_before = schema_rows(path)
    upgrade(store.engine, after)
    at_after = schema_rows(path)
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
        assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [(after,)]
    return store, at_before, at_after
