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

from .connections import ThreadConnections
from .durability import Durability
from .engine import ContentionPolicy, create_store_engine
from .errors import SchemaError
from .layout import STANDARD, Layout, LayoutCell
from .location import resolve_url, sqlite_file
from .private_files import ensure_private_database
from .schema_state import HEAD_SCHEMA_VERSION, Ladder, read_schema_state
from .uow import UnitOfWork


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
        self.url: URL = resolve_url(target)
        self.path: Path | None = sqlite_file(self.url)
        if self.path is not None:
            ensure_private_database(self.path)
        self.policy = policy or ContentionPolicy()
        self.engine: Engine = _engine_for(self.url, self.policy, self.durability)
        self._connections = ThreadConnections(self.engine)
        self._layouts: LayoutCell | None = None  # PostgreSQL: always our own layout
        self._open_schema(migrate)

    def _open_schema(self, migrate: bool) -> None:
        """Read the file's schema state, migrate if it is ours and behind, learn its layout.

        On a file at our head this is one read, on this thread's kept
        connection, which the caller's first unit of work then reuses; Alembic
        is imported only when there is something to migrate. A file of the
        agent's own schema versions (7 and later) is never migrated: its
        layout is read and the repositories follow it.
        """
        if self._learn_layout(migrate):
            return
        from .migrate import upgrade

        upgrade(self.engine, "head")
        self._learn_layout(migrate=False)

    def _learn_layout(self, migrate: bool) -> bool:
        """Read state and layout in one read unit; False when a migration must come first."""
        with UnitOfWork(self._connections, write=False) as uow:
            state = read_schema_state(uow.connection)
            if state.ladder is Ladder.AGENT and self.engine.dialect.name != "sqlite":
                raise SchemaError(
                    f"{self!r} holds schema_version {state.version}, which no hermes_store "
                    f"writes (it keeps the document's {HEAD_SCHEMA_VERSION}) and the agent's "
                    "own code does not use PostgreSQL: refusing to guess its schema"
                )
            if migrate and state.needs_migration:
                return False
            if self.engine.dialect.name == "sqlite":
                cell = LayoutCell(STANDARD, state.cookie)
                # A file still to be migrated (by a caller that opened it with
                # migrate=False to do so itself) keeps the standard layout: the
                # first unit after the migration sees the cookie move and reads it.
                if not state.needs_migration:
                    cell.refresh(uow.connection.connection.driver_connection, state)
                self._layouts = cell
        return True

    @property
    def layout(self) -> Layout:
        """The layout the store reads the file in (see :mod:`hermes_store.layout`)."""
        if self._layouts is None:
            return STANDARD
        return self._layouts.layout

    @property
    def ladder(self) -> Ladder:
        """Whose version steps the file follows: ours, or the Hermes agent's own."""
        return self.layout.ladder

    def read(self) -> UnitOfWork:
        """A unit of work that only reads: one snapshot, no write lock."""
        return UnitOfWork(self._connections, write=False, layouts=self._layouts)

    def write(self, *, patience_s: float | None = None) -> UnitOfWork:
        """A unit of work that writes; ``patience_s`` overrides the policy's lock budget."""
        return UnitOfWork(
            self._connections, write=True, patience_s=patience_s, layouts=self._layouts
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
