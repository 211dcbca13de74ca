"""Which schema a database holds, read without Alembic: the check every open makes.

Opening a store asks "is this file current?" before anything else. On a
current file (the normal case) that answer must cost one cheap read -- no
Alembic import, no reflection, no write lock -- so this module depends on
SQLAlchemy alone; :mod:`hermes_store.migrate` brings Alembic in only when
there is something to migrate.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from .engine import READ_OPTION
from .errors import SchemaError

HEAD_SCHEMA_VERSION = 7
HEAD_REVISION = "0007"


def revision_for_version(version: int) -> str:
    """The revision whose upgrade leaves ``schema_version`` at ``version``.

    Raises :class:`SchemaError` for a version this package does not know: a
    larger one means a newer program wrote the file, and guessing would risk
    its data.
    """
    if version < 1:
        raise SchemaError(f"schema_version {version} is not a schema version (they start at 1)")
    if version > HEAD_SCHEMA_VERSION:
        raise SchemaError(
            f"schema_version {version} is not one this hermes_store knows "
            f"(1..{HEAD_SCHEMA_VERSION}); the database was written by a newer "
            "version of the program: upgrade hermes_store instead of the database"
        )
    return f"{version:04d}"


def version_for_revision(revision: str) -> int:
    """The ``schema_version`` a database at ``revision`` holds."""
    if len(revision) == 4 and revision.isdigit() and 1 <= int(revision) <= HEAD_SCHEMA_VERSION:
        return int(revision)
    raise SchemaError(
        f"alembic revision {revision!r} is not one this hermes_store knows "
        f"(0001..{HEAD_REVISION}); the database was migrated by a newer version "
        "of the program: upgrade hermes_store instead of the database"
    )


_STATE_TABLES = ("schema_version", "alembic_version")
_VERSION = text("SELECT MAX(version) FROM schema_version")
_REVISION = text("SELECT version_num FROM alembic_version")
# SQLite answers both in one statement when both tables exist (every current
# file), run on the driver: the open of a current file pays for nothing else.
# A missing table is an error that leaves the transaction usable.
_BOTH_SQLITE = (
    "SELECT (SELECT MAX(version) FROM schema_version), (SELECT version_num FROM alembic_version)"
)


def read_state(connection: Connection) -> tuple[int | None, str | None]:
    """(``schema_version``, Alembic revision) as stored; None where absent.

    Only reads, so it can run on a ``hermes_read`` connection without taking
    the write lock. A ``schema_version`` that is not a whole number is a
    :class:`SchemaError`: no program of ours wrote it.
    """
    if connection.dialect.name == "sqlite":
        dbapi_connection = connection.connection.driver_connection
        try:
            version, revision = dbapi_connection.execute(_BOTH_SQLITE).fetchone()
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", None) != sqlite3.SQLITE_ERROR:
                raise  # not a missing table: the file itself failed
        else:
            return _version_number(version), revision
    present = {name for name in _STATE_TABLES if connection.dialect.has_table(connection, name)}
    version = revision = None
    if "schema_version" in present:
        version = _version_number(connection.execute(_VERSION).scalar())
    if "alembic_version" in present:
        revision = connection.execute(_REVISION).scalar()
    return version, revision


def _version_number(raw: object) -> int | None:
    """The stored ``schema_version`` as an int; SchemaError for ``'abc'`` and the like."""
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    raise SchemaError(
        f"schema_version holds {raw!r}, not a schema version number: the file was not "
        "written by the Hermes store (or was changed by hand); refusing to guess its schema"
    )


def check_known(version: int | None, revision: str | None) -> None:
    """Refuse a database written by a newer program, before anything touches it."""
    if version is not None and version > HEAD_SCHEMA_VERSION:
        revision_for_version(version)
    if revision is not None:
        version_for_revision(revision)


def is_current_on(connection: Connection) -> bool:
    """True when the database behind ``connection`` is at head; SchemaError if newer."""
    version, revision = read_state(connection)
    check_known(version, revision)
    return (version, revision) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)


def is_current(engine: Engine) -> bool:
    """:func:`is_current_on` in a read-only transaction of its own.

    Deciding that nothing is to be done must neither write nor wait for a writer.
    """
    with engine.connect().execution_options(**{READ_OPTION: True}) as connection:
        return is_current_on(connection)
