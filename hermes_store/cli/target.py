"""Where a command's store is: the options that name it, resolved once into a :class:`Target`.

Every command that works on a store takes ``--db PATH`` or ``--url URL``
(and ``--patience``); the reading ones also ``--read-url`` and
``--max-replica-lag``. The dispatcher (:func:`hermes_store.cli.main`) turns
them into one :class:`Target` with :func:`resolve` before the command runs,
so the rule of which store is meant -- the option, else ``$HERMES_STORE_URL``,
else ``$HERMES_HOME/state.db``, else ``~/.hermes/state.db`` -- lives here and
nowhere else, and a command receives the answer instead of the options.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError

from hermes_store.api.session_db import SessionDB
from hermes_store.backends.location import resolve_url, sqlite_file, sqlite_url
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.read_route import DEFAULT_MAX_LAG_S, READ_URL_ENV
from hermes_store.cli.args import (
    CliError,
    UsageError,
    arg,
    file_path,
    non_negative_float,
    non_negative_int,
    store_url,
)
from hermes_store.schema.state import read_state
from hermes_store.uow.store import Store

# ----------------------------------------------------------------------
# the options every command shares
# ----------------------------------------------------------------------
DB = arg(
    "--db",
    type=file_path,
    metavar="PATH",
    help="SQLite file of the store [default: $HERMES_STORE_URL, else "
    "$HERMES_HOME/state.db, else ~/.hermes/state.db]",
)
URL_ = arg(
    "--url", type=store_url, metavar="URL", help="SQLAlchemy URL of the store, instead of --db."
)
PATIENCE = arg(
    "--patience",
    type=non_negative_float,
    metavar="SECONDS",
    help="Seconds to wait for another writer's lock [default: 30]",
)
JSON = arg("--json", dest="as_json", action="store_true", help="Machine output: JSON on stdout.")
STORE = (DB, URL_, PATIENCE)
"""Where the store is, and how long to wait for its lock: every command but copy and recover."""
READ_URL = arg(
    "--read-url",
    type=store_url,
    metavar="URL",
    help="A PostgreSQL replica to read from; the primary answers when it is down or behind "
    f"[default: ${READ_URL_ENV} (for a server store)]",
)
MAX_REPLICA_LAG = arg(
    "--max-replica-lag",
    type=non_negative_float,
    default=DEFAULT_MAX_LAG_S,
    metavar="SECONDS",
    help="How far behind the replica may be and still answer.",
)
READING = (*STORE, READ_URL, MAX_REPLICA_LAG)
"""The reading commands': where the store is, and the replica that may answer for it."""
SESSION_ID = arg("session_id", metavar="ID", help="Session id.")
OFFSET = arg(
    "--offset", type=non_negative_int, default=0, metavar="N", help="Skip this many first."
)


def source_option(help: str) -> Any:
    return arg("--source", metavar="SOURCE", help=help)


def repeatable(name: str, help: str) -> Any:
    return arg(name, action="append", metavar=name.lstrip("-").split("-")[-1].upper(), help=help)


# ----------------------------------------------------------------------
# the target
# ----------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The store a command works on, how long it waits for a lock, the replica it may read.

    ``named`` says whether --db or --url chose it (``demo`` writes to its own
    folder unless told otherwise, never into the store the environment names).
    """

    url: URL
    patience: float | None
    read_url: str | None = None
    max_replica_lag: float = DEFAULT_MAX_LAG_S
    named: bool = False

    @property
    def path(self) -> Path | None:
        return sqlite_file(self.url)

    def describe(self) -> str:
        path = self.path
        return str(path) if path is not None else self.url.render_as_string(hide_password=True)

    def exists(self) -> bool:
        path = self.path
        return path is None or path.exists()


def target_of(db: Path | None, url: str | None, patience: float | None) -> Target:
    """The store named by --db or --url (one of them at most), else by the environment."""
    if db is not None and url is not None:
        raise UsageError("give --db or --url, not both")
    try:
        resolved = sqlite_url(db) if db is not None else resolve_url(url)
    except ArgumentError as error:
        raise CliError(f"invalid store URL: {error}") from None
    return Target(resolved, patience, named=db is not None or url is not None)


def resolve(options: dict[str, Any]) -> Target | None:
    """Take the store's options out of a command's parsed ``options``: their :class:`Target`.

    None for a command that names no store of its own (``copy``, ``recover``:
    theirs are --from and --to). A reading command's target carries the
    replica of --read-url; ``$HERMES_STORE_READ_URL`` stands in for it on a
    server store only: a fleet's environment names its replica once, and a
    command pointed at a SQLite file (which has none) is not refused for it.
    """
    if "db" not in options:
        return None
    target = target_of(options.pop("db"), options.pop("url"), options.pop("patience"))
    if "read_url" not in options:
        return target
    read_url: str | None = options.pop("read_url")
    if read_url is None and target.path is None:
        read_url = os.environ.get(READ_URL_ENV) or None
    return replace(target, read_url=read_url, max_replica_lag=options.pop("max_replica_lag"))


# ----------------------------------------------------------------------
# opening it
# ----------------------------------------------------------------------
def open_store(
    target: Target, *, create: bool = False, migrate: bool = True, read_only: bool = False
) -> Store:
    """The store at ``target``; a missing file is an error unless ``create``.

    ``read_only``: the reading commands open the file as it is -- never
    created, migrated, adopted or tightened -- and take no write lock.
    """
    if not create and not target.exists():
        raise CliError(
            f"no database at {target.describe()} "
            "(run 'hermes-store upgrade' to create one, or pass --db)"
        )
    policy = ContentionPolicy(patience_s=target.patience) if target.patience is not None else None
    return Store(
        target.url,
        policy=policy,
        migrate=migrate,
        read_only=read_only,
        read_url=target.read_url,
        max_replica_lag=target.max_replica_lag,
    )


@contextmanager
def session_db(
    target: Target, *, create: bool = False, read_only: bool = False
) -> Iterator[SessionDB]:
    with open_store(target, create=create, read_only=read_only) as store:
        yield SessionDB(store=store)


@contextmanager
def reader(target: Target) -> Iterator[SessionDB]:
    """A SessionDB for a command that only reads: the file is opened read-only."""
    with session_db(target, read_only=True) as sdb:
        yield sdb


def state(store: Store) -> tuple[int | None, str | None]:
    """The store's schema version and Alembic revision."""
    with store.read() as uow:
        return read_state(uow.connection)
