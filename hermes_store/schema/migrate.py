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

import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from hermes_store.errors import SchemaError
from hermes_store.schema.state import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    Ladder,
    check_known,
    is_current,
    read_schema_state,
    read_state,
    refuse_foreign_file,
    revision_for_version,
    version_for_revision,
)

__all__ = [
    "HEAD_REVISION",
    "HEAD_SCHEMA_VERSION",
    "alembic_config",
    "check_known",
    "downgrade",
    "is_agent_file",
    "is_current",
    "prepare_database",
    "read_state",
    "revision_for_version",
    "script_location",
    "stamp",
    "sync_schema_version",
    "upgrade",
    "upgrade_to_head",
    "version_for_revision",
]

_MIGRATIONS_PACKAGE = "hermes_store._migrations"


def script_location() -> str:
    """The Alembic scripts: the installed ``hermes_store._migrations`` or the checkout's.

    The package is tried first because it is what an installed (or editable)
    hermes_store was built with; a bare checkout on ``sys.path`` has no such
    package and falls back to ``migrations/`` beside ``hermes_store/`` (this
    module is ``hermes_store/schema/migrate.py``: three levels down from the
    checkout's root).
    """
    try:
        installed = resources.files(_MIGRATIONS_PACKAGE)
    except ModuleNotFoundError:
        installed = None
    if isinstance(installed, Path) and (installed / "env.py").is_file():
        return str(installed)
    checkout = Path(__file__).resolve().parents[2] / "migrations"
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


def is_agent_file(context: MigrationContext) -> bool:
    """True when the file follows the agent's own version ladder (7 and later).

    Such a file is shared with the agent's code, which owns its schema: env.py
    then runs no revision at all, so ``alembic upgrade head`` leaves it as it is.
    """
    connection = context.connection
    if connection is None or context.as_sql:
        return False
    return read_schema_state(connection).ladder is Ladder.AGENT


def prepare_database(context: MigrationContext, script: ScriptDirectory) -> str | None:
    """Check the database and stamp a file made by the old code; called by env.py.

    Runs inside the migration's transaction, before ``run_migrations``. A
    file with ``schema_version`` N and no Alembic revision is stamped
    ``000N``; the upgrade then starts from there. Returns the stamped
    revision, if any. Commands that must not write (``alembic current``),
    offline SQL generation and files of the agent's own ladder are left alone.
    """
    connection = context.connection
    if connection is None or context.as_sql:  # offline (--sql): nothing to inspect
        return None
    if context.opts.get("dont_mutate"):  # `alembic current` shows the file as it is
        return None
    version, revision = read_state(connection)
    if check_known(version, revision) is Ladder.AGENT or revision is not None:
        return None
    if version is None:
        if connection.dialect.name == "sqlite":
            refuse_foreign_file(connection, str(connection.engine.url.database))
        elif "sessions" in inspect(connection).get_table_names():
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
    state = read_schema_state(connection)
    version, revision = state.version, state.revision
    if revision is None or version is None or state.ladder is Ladder.AGENT:
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


def upgrade_to_head(engine: Engine) -> None:
    """Migrate ``engine``'s database to head; a current database is left untouched."""
    if is_current(engine):
        return
    upgrade(engine, "head")


def upgrade(engine: Engine, revision: str) -> None:
    """Adopt an old file if need be and upgrade it to ``revision``, in one write transaction."""
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)


StepReport = Callable[[str, str, float], None]
"""``on_step(revision, what, seconds)``: one revision applied, what it does, how long it took."""


def upgrade_in_steps(engine: Engine, on_step: StepReport) -> None:
    """Upgrade to head one revision per transaction, reporting each step as it ends.

    A populated deployment's upgrade can take minutes; one transaction per
    revision keeps each step's locks only as long as that step runs (a
    writer waits for the step holding its table, not for the whole chain)
    and lets the caller say which step is running and what each one cost. A
    database with no revision recorded yet (empty, or a file of the old code
    to adopt) is upgraded in one transaction, as :func:`upgrade` does, since
    adoption decides where the chain starts.
    """
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    if current is None:
        started = time.perf_counter()
        upgrade(engine, "head")
        on_step("head", "the whole chain (nothing recorded before)", time.perf_counter() - started)
        return
    script = ScriptDirectory.from_config(alembic_config())
    for revision in reversed(list(script.iterate_revisions("head", current))):
        started = time.perf_counter()
        upgrade(engine, revision.revision)
        on_step(revision.revision, _what(revision.doc), time.perf_counter() - started)


def _what(doc: str | None) -> str:
    """A revision's one-line summary: its docstring's first line, without the common preamble."""
    first = (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""
    return first.removeprefix("Our addition (schema_version stays 6): ").rstrip(".")


def downgrade(engine: Engine, revision: str) -> None:
    """Step the database down to ``revision`` (``"base"`` drops everything)."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)


def stamp(engine: Engine, revision: str) -> None:
    """Record ``revision`` without running migrations (and sync ``schema_version``)."""
    with engine.begin() as connection:
        command.stamp(alembic_config(connection), revision)
