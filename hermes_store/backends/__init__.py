"""The database backends: each one's rules in a package of its own.

``sqlite/`` holds SQLite's (WAL, ``BEGIN IMMEDIATE`` with jittered retry, the
driver-level transactions, the private file, a file replaced under the
store); ``postgresql/`` holds PostgreSQL's (isolation, ``lock_timeout``,
retry of aborted writes, the tsquery translation and its search statements).
What both share -- the contention policy, the durability setting, where the
store lives, the execution options, and the statements run with the least
overhead -- sits beside them. :func:`create_store_engine` is the one place
that picks a backend from a URL.
"""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine

from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy


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
    PostgreSQL transactions begun ``READ ONLY``).
    """
    policy = policy or ContentionPolicy()
    durability = Durability.of(durability)
    backend = url.get_backend_name()
    if backend == "postgresql":
        from hermes_store.backends.postgresql.engine import create_postgresql_engine

        return create_postgresql_engine(url, policy, durability, read_only=read_only)
    if backend == "sqlite":
        from hermes_store.backends.sqlite.engine import create_sqlite_engine

        return create_sqlite_engine(url, policy, durability, read_only=read_only)
    return create_engine(url, pool_pre_ping=True)
