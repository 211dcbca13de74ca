"""Bring any state.db to the head schema, adopting files the old code made.

The old ``sqlite3`` store versioned its schema with a one-row
``schema_version`` table and no Alembic. Such a file is *adopted*: its
version N is stamped as revision ``000N`` and Alembic upgrades it in place
from there. ``migrations/env.py`` calls :func:`prepare_database`, so the
``alembic`` command line and the library adopt files by the same code.

The check whether anything is to be done is a read, so opening a current
database writes nothing (not even a lock); the upgrade itself runs in one
``BEGIN IMMEDIATE`` transaction, so a failure leaves the file as it was and
two processes opening the same old file cannot both adopt it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from .engine import READ_OPTION
from .errors import SchemaError

HEAD_SCHEMA_VERSION = 7
HEAD_REVISION = "0007"

_MIGRATIONS_PACKAGE = "hermes_store._migrations"


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


def script_location() -> str:
    """The Alembic scripts: the installed ``hermes_store._migrations`` or the checkout's.

    The package is tried first because it is what an installed (or editable)
    hermes_store was built with; a bare checkout on ``sys.path`` has no such
    package and falls back to ``migrations/`` beside ``hermes_store/``.
    """
    try:
        installed = resources.files(_MIGRATIONS_PACKAGE)
    except ModuleNotFoundError:
        installed = None
    if isinstance(installed, Path) and (installed / "env.py").is_file():
        return str(installed)
    checkout = Path(__file__).resolve().parent.parent / "migrations"
    if (checkout / "env.py").is_file() and (checkout / "versions").is_dir():
        return str(checkout)
    raise SchemaError(
        "cannot find the Alembic scripts: neither the package "
        f"{_MIGRATIONS_PACKAGE} nor {checkout} holds env.py"
    )


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """A Config for the store's scripts, without needing ``alembic.ini``.

    ``connection`` is handed to env.py (Alembic's cookbook recipe), which then
    migrates inside the caller's transaction; ``url`` is used otherwise.
    """
    config = Config()
    config.set_main_option("script_location", script_location())
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def read_state(connection: Connection) -> tuple[int | None, str | None]:
    """(``schema_version``, Alembic revision) as stored; None where absent.

    Only reads, so it can run on a ``hermes_read`` connection without taking
    the write lock.
    """
    tables = set(inspect(connection).get_table_names())
    version = None
    if "schema_version" in tables:
        raw = connection.execute(text("SELECT MAX(version) FROM schema_version")).scalar()
        version = None if raw is None else int(raw)
    revision = None
    if "alembic_version" in tables:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return version, revision


def check_known(version: int | None, revision: str | None) -> None:
    """Refuse a database written by a newer program, before anything touches it."""
    if version is not None and version > HEAD_SCHEMA_VERSION:
        revision_for_version(version)
    if revision is not None:
        version_for_revision(revision)


def prepare_database(context: MigrationContext, script: ScriptDirectory) -> str | None:
    """Check the database and stamp a file made by the old code; called by env.py.

    Runs inside the migration's transaction, before ``run_migrations``. A
    file with ``schema_version`` N and no Alembic revision is stamped
    ``000N``; the upgrade then starts from there. Returns the stamped
    revision, if any. Commands that must not write (``alembic current``) and
    offline SQL generation are left alone.
    """
    connection = context.connection
    if connection is None or context.as_sql:  # offline (--sql): nothing to inspect
        return None
    if context.opts.get("dont_mutate"):  # `alembic current` shows the file as it is
        return None
    version, revision = read_state(connection)
    check_known(version, revision)
    if revision is not None:
        return None
    if version is None:
        if "sessions" in inspect(connection).get_table_names():
            raise SchemaError(
                "the database has a sessions table but no schema_version row and no "
                "alembic_version; refusing to guess which schema it has"
            )
        return None
    legacy = revision_for_version(version)
    context.stamp(script, legacy)
    return legacy


def sync_schema_version(context: MigrationContext) -> None:
    """Make ``schema_version`` agree with the Alembic revision after a command.

    Every revision sets ``schema_version`` itself; this only mends files
    where the two drifted apart (an old program bumped one and not the
    other, or ``alembic stamp``), so the old code and this one read the same
    version. Without it such a file would never look current and every open
    would take the write lock to do nothing.
    """
    connection = context.connection
    if connection is None or context.as_sql or context.opts.get("dont_mutate"):
        return
    version, revision = read_state(connection)
    if revision is None or version is None:
        return
    wanted = version_for_revision(revision)
    if version != wanted:
        set_schema_version(connection, wanted)


def set_schema_version(connection: Connection, version: int) -> None:
    """Leave ``schema_version`` holding ``version`` in every row (one, normally).

    UPDATE rather than DELETE + INSERT keeps the table's rows as the old code
    wrote them; an empty table gets its row.
    """
    updated = connection.execute(text("UPDATE schema_version SET version = :v"), {"v": version})
    if updated.rowcount == 0:
        connection.execute(text("INSERT INTO schema_version (version) VALUES (:v)"), {"v": version})


def is_current(engine: Engine) -> bool:
    """True when the database is at head; raises SchemaError if it is newer.

    A read-only transaction: deciding that nothing is to be done must neither
    write nor wait for a writer.
    """
    with engine.connect().execution_options(**{READ_OPTION: True}) as connection:
        version, revision = read_state(connection)
    check_known(version, revision)
    return (version, revision) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)


def upgrade_to_head(engine: Engine) -> None:
    """Migrate ``engine``'s database to head; a current database is left untouched."""
    if is_current(engine):
        return
    upgrade(engine, "head")


def upgrade(engine: Engine, revision: str) -> None:
    """Adopt an old file if need be and upgrade it to ``revision``, in one write transaction."""
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Step the database down to ``revision`` (``"base"`` drops everything)."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)


def stamp(engine: Engine, revision: str) -> None:
    """Record ``revision`` without running migrations (and sync ``schema_version``)."""
    with engine.begin() as connection:
        command.stamp(alembic_config(connection), revision)
