"""The database backends: each one's rules in a package of its own.

``sqlite/`` holds SQLite's (WAL, ``BEGIN IMMEDIATE`` with jittered retry, the
driver-level transactions, the private file, a file replaced under the
store, the agent's file layouts, FTS5); ``postgresql/`` holds PostgreSQL's
(isolation, ``lock_timeout``, retry of aborted writes, the tsquery
translation and its search statements). Each implements
:class:`~hermes_store.backends.base.Backend`, and :data:`BACKENDS` maps a
dialect name to it: repositories and units of work reach a backend only
through :func:`backend_of`. What both share -- the contention policy, the
durability setting, where the store lives, the execution options, and the
statements run with the least overhead -- sits beside them.
:func:`create_store_engine` is the one place that picks a backend from a URL.
"""

from __future__ import annotations

from sqlalchemy.engine import URL, Connection, Engine

from hermes_store.backends.base import Backend
from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.postgresql.backend import POSTGRESQL
from hermes_store.backends.sqlite.backend import SQLITE
from hermes_store.errors import UnknownBackendError

BACKENDS: dict[str, Backend] = {SQLITE.name: SQLITE, POSTGRESQL.name: POSTGRESQL}
"""Every backend by its SQLAlchemy dialect name; a new backend adds its entry here."""


def backend_named(name: str) -> Backend:
    """The backend of dialect ``name``, or :class:`~hermes_store.errors.UnknownBackendError`."""
    try:
        return BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise UnknownBackendError(
            f"no backend for the {name!r} dialect (this store runs on {known})"
        ) from None


def backend_of(bind: Connection | Engine) -> Backend:
    """The backend of a connection's or an engine's dialect."""
    return backend_named(bind.dialect.name)


def create_store_engine(
    url: URL,
    policy: ContentionPolicy | None = None,
    durability: Durability | str = Durability.FULL,
    *,
    read_only: bool = False,
) -> Engine:
    """An engine for ``url`` with its backend's rules installed.

    ``durability`` is checked first, so a wrong value opens nothing;
    ``read_only`` makes every connection read-only (SQLite ``mode=ro``,
    PostgreSQL transactions begun ``READ ONLY``). A URL of a dialect with no
    backend is :class:`~hermes_store.errors.UnknownBackendError`.
    """
    policy = policy or ContentionPolicy()
    durability = Durability.of(durability)
    backend = backend_named(url.get_backend_name())
    return backend.create_engine(url, policy, durability, read_only=read_only)
