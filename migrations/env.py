"""Alembic environment shared by `alembic upgrade head` and the library.

The library passes its own connection (already inside a write transaction)
through ``config.attributes["connection"]``, as in Alembic's cookbook; the
command line builds a store engine for the URL from ``-x url=...``,
``$HERMES_STORE_URL`` or ``$HERMES_HOME/state.db``. Either way the same SQLite
rules apply (WAL, ``BEGIN IMMEDIATE``, private file), the whole upgrade is
one transaction, and a file made by the old code is adopted first.
"""

from __future__ import annotations

from alembic import context
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from hermes_store.location import resolve_url
from hermes_store.migrate import adopt_legacy_database
from hermes_store.models import Base
from hermes_store.store import Store

config = context.config


def _target_url() -> str | None:
    return context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        adopt_legacy_database(context.get_context(), ScriptDirectory.from_config(config))
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=resolve_url(_target_url()).render_as_string(hide_password=False),
        target_metadata=Base.metadata,
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
    store = Store(_target_url(), migrate=False)
    try:
        with store.engine.begin() as own_connection:
            _run(own_connection)
    finally:
        store.close()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
