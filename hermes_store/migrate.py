"""Bring any state.db to the head schema, adopting files the old code made.

The old ``sqlite3`` store versioned its schema with a one-row
``schema_version`` table and no Alembic. Such a file is *adopted*: its
version N is stamped as revision ``000N`` and Alembic upgrades it in place
from there. The check whether anything is to be done is a read, so opening a
current database writes nothing; the upgrade itself runs in one write
transaction, so a failure leaves the file as it was.
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

HEAD_SCHEMA_VERSION = 6
HEAD_REVISION = "0006"


def revision_for_version(version: int) -> str:
    if not 1 <= version <= HEAD_SCHEMA_VERSION:
        raise SchemaError(
            f"schema_version {version} is not one this package knows "
            f"(1..{HEAD_SCHEMA_VERSION}); is the file from a newer hermes_store?"
        )
    return f"{version:04d}"


def script_location() -> str:
    """The Alembic scripts: the checkout's ``migrations/`` or the installed copy."""
    checkout = Path(__file__).resolve().parent.parent / "migrations"
    if (checkout / "env.py").is_file():
        return str(checkout)
    return str(resources.files("hermes_store._migrations"))


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", script_location())
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def read_state(connection: Connection) -> tuple[int | None, str | None]:
    """(``schema_version``, Alembic revision) as stored; None where absent."""
    tables = set(inspect(connection).get_table_names())
    version = None
    if "schema_version" in tables:
        version = connection.execute(text("SELECT MAX(version) FROM schema_version")).scalar()
    revision = None
    if "alembic_version" in tables:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return version, revision


def adopt_legacy_database(context: MigrationContext, script: ScriptDirectory) -> str | None:
    """Stamp a file made by the old code with the revision of its schema_version.

    Runs inside the upgrade's transaction, so two processes opening the same
    old file cannot both adopt it. Returns the stamped revision, if any.
    """
    connection = context.connection
    assert connection is not None
    version, revision = read_state(connection)
    if revision is not None:
        return None
    if version is None:
        if "sessions" in inspect(connection).get_table_names():
            raise SchemaError(
                "the database has a sessions table but neither schema_version nor "
                "alembic_version; refusing to guess its schema"
            )
        return None
    legacy = revision_for_version(int(version))
    context.stamp(script, legacy)
    return legacy


def is_current(engine: Engine) -> bool:
    with engine.connect().execution_options(**{READ_OPTION: True}) as connection:
        state = read_state(connection)
    if state[0] is not None and state[0] > HEAD_SCHEMA_VERSION:
        revision_for_version(int(state[0]))  # raises the clear SchemaError
    return state == (HEAD_SCHEMA_VERSION, HEAD_REVISION)


def upgrade_to_head(engine: Engine) -> None:
    """Migrate ``engine``'s database to head; a current database is left untouched."""
    if is_current(engine):
        return
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "head")


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
