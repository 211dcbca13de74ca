"""Alembic environment shared by `alembic upgrade head` and the library.

The library passes its own connection (already inside a write transaction)
through ``config.attributes["connection"]``, as in Alembic's cookbook; the
command line builds a store engine for the URL from ``-x url=...``,
``sqlalchemy.url``, ``$HERMES_STORE_URL`` or ``$HERMES_HOME/state.db``, in
that order. Either way the same SQLite rules apply (WAL, ``BEGIN
IMMEDIATE``, private file), the whole command is one transaction, and a file
made by the old code is adopted first (:func:`hermes_store.schema.migrate.prepare_database`).
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection

from hermes_store.backends import create_store_engine
from hermes_store.backends.location import resolve_url, sqlite_file
from hermes_store.backends.postgresql.engine import lock_schema
from hermes_store.backends.sqlite.private_files import (
    ensure_private_database,
    tighten_private_database,
)
from hermes_store.schema.migrate import (
    is_agent_file,
    prepare_database,
    sync_schema_version,
)
from hermes_store.schema.tables import metadata

config = context.config

# Only the command line configures logging: a library caller owns its own.
if config.config_file_name is not None and "connection" not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _target_url() -> URL:
    explicit = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    return resolve_url(explicit or None)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        # PostgreSQL: one upgrader at a time (SQLite's BEGIN IMMEDIATE does this there).
        lock_schema(connection)
        migration_context = context.get_context()
        if is_agent_file(migration_context) and not migration_context.opts.get("dont_mutate"):
            # The agent's own code owns this file's schema (versions 7 and
            # later): no revision of ours runs on it, it is used as it is.
            return
        prepare_database(migration_context, ScriptDirectory.from_config(config))
        context.run_migrations()
        sync_schema_version(migration_context)


def run_migrations_offline() -> None:
    """Emit SQL only; legacy adoption needs a database, so it is not attempted."""
    context.configure(
        url=_target_url(),
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = _target_url()
    path = sqlite_file(url)
    if path is not None:
        # Creates the parent folder and the file itself 0600: it will hold
        # conversations. An existing file is tightened once it proved to be a
        # session store (a foreign database is refused as it was found).
        ensure_private_database(path, tighten=False)
    engine = create_store_engine(url)
    try:
        with engine.begin() as own_connection:
            _run(own_connection)
    finally:
        engine.dispose()
    if path is not None:
        tighten_private_database(path)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
