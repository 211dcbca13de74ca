"""The store: one engine, brought to the head schema, handing out units of work.

This is the object agent services receive by injection (it satisfies
:class:`~hermes_store.uow.UnitOfWorkFactory`); there is no module-level
engine that code reaches for, so two stores on two files in one process never
share state. Stores on the *same* database and policy in one process do share
one engine (see :func:`_engine_for`): opening the store again -- a CLI command,
a worktree agent, a test -- then costs a connect and one read, not a new
engine with cold statement caches.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import NoSuchModuleError

from . import forking
from .connections import ThreadConnections
from .durability import Durability
from .engine import ContentionPolicy, create_store_engine
from .errors import InvalidInputError
from .failures import Failures, missing_driver
from .location import resolve_url, sqlite_file
from .postgres import kept_connection_alive
from .private_files import ensure_private_database
from .schema_state import is_current_on
from .uow import UnitOfWork
from .validation import number_arg


@lru_cache(maxsize=16)
def _engine_for(url: URL, policy: ContentionPolicy, durability: Durability) -> Engine:
    """One engine per (database, policy, durability) per process, reused across open and close.

    ``Store.close`` empties the engine's pool, which closes its connections
    (so the file is free for others) but keeps the engine, its event rules and
    its compiled-statement cache for the next store on the same database.
    """
    return create_store_engine(url, policy, durability)


class Store:
    """Owns the engine for one database and opens units of work on it.

    ``durability`` (``"full"`` by default, or ``"normal"``) says whether a
    commit is on the disk before the call returns; see
    :mod:`hermes_store.durability` for what ``"normal"`` risks and saves.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | URL | None = None,
        *,
        policy: ContentionPolicy | None = None,
        durability: Durability | str = Durability.FULL,
        migrate: bool = True,
    ) -> None:
        # Checked before anything is touched: a wrong value creates no file.
        self.durability = Durability.of(durability)
        if policy is not None and not isinstance(policy, ContentionPolicy):
            raise InvalidInputError(
                f"policy must be a ContentionPolicy, got {type(policy).__name__}"
            )
        self.url: URL = resolve_url(target)
        self.path: Path | None = sqlite_file(self.url)
        self._failures = Failures.of(self.url)
        if self.path is not None:
            try:
                ensure_private_database(self.path)
            except OSError as error:
                raise self._failures.from_os(error) from error
        self.policy = policy or ContentionPolicy()
        self.engine: Engine = self._engine()
        alive = kept_connection_alive if self.url.get_backend_name() == "postgresql" else None
        self._connections = ThreadConnections(self.engine, alive)
        forking.watch(self.engine, self._connections)
        if migrate:
            self.upgrade_to_head()

    def _engine(self) -> Engine:
        try:
            return _engine_for(self.url, self.policy, self.durability)
        except NoSuchModuleError:
            raise InvalidInputError(
                f"{self._failures.where}: no database backend {self.url.get_backend_name()!r} "
                "(hermes_store runs on SQLite and PostgreSQL)"
            ) from None
        except ModuleNotFoundError as error:
            if (error.name or "").startswith("hermes_store"):
                raise  # our own packaging problem, not the caller's
            raise missing_driver(self._failures.where, self.url, error) from error

    def upgrade_to_head(self) -> None:
        """Migrate only when the database is not current (what opening does by default).

        The check is one read, on this thread's kept connection, which the
        caller's first unit of work then reuses. Alembic is imported only when
        there is something to migrate; the upgrade is one write transaction.
        """
        with self.read() as uow:
            current = is_current_on(uow.connection)
        if current:
            return
        from .migrate import upgrade

        try:
            upgrade(self.engine, "head")
        except Exception as error:
            named = self._failures.translate(error)
            if named is None:
                raise
            raise named from error

    def read(self) -> UnitOfWork:
        """A unit of work that only reads: one snapshot, no write lock."""
        return UnitOfWork(self._connections, write=False, failures=self._failures)

    def write(self, *, patience_s: float | None = None) -> UnitOfWork:
        """A unit of work that writes; ``patience_s`` overrides the policy's lock budget."""
        if patience_s is not None:
            patience_s = number_arg("patience_s", patience_s, minimum=0.0)
        return UnitOfWork(
            self._connections, write=True, patience_s=patience_s, failures=self._failures
        )

    def close(self) -> None:
        """Close every idle connection, releasing the file; a later unit reconnects.

        The pool is emptied, not replaced (``engine.dispose`` would make a new
        pool, whose first connect re-runs the dialect's initialisation on the
        next open of the same database).
        """
        self._connections.close_all()
        self.engine.pool.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url.render_as_string(hide_password=True)!r})"
