"""The store: one engine, brought to the head schema, handing out units of work.

This is the object agent services receive by injection (it satisfies
:class:`~hermes_store.uow.UnitOfWorkFactory`); there is no module-level
engine, so two stores on two files in one process never share state.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, Engine

from .engine import ContentionPolicy, create_store_engine
from .location import resolve_url, sqlite_file
from .private_files import ensure_private_database
from .uow import UnitOfWork


class Store:
    """Owns the engine for one database and opens units of work on it."""

    def __init__(
        self,
        target: str | os.PathLike[str] | URL | None = None,
        *,
        policy: ContentionPolicy | None = None,
        migrate: bool = True,
    ) -> None:
        self.url: URL = resolve_url(target)
        self.path: Path | None = sqlite_file(self.url)
        if self.path is not None:
            ensure_private_database(self.path)
        self.policy = policy or ContentionPolicy()
        self.engine: Engine = create_store_engine(self.url, self.policy)
        if migrate:
            from .migrate import upgrade_to_head

            upgrade_to_head(self.engine)

    def read(self) -> UnitOfWork:
        """A unit of work that only reads: one snapshot, no write lock."""
        return UnitOfWork(self.engine, write=False)

    def write(self, *, patience_s: float | None = None) -> UnitOfWork:
        """A unit of work that writes; ``patience_s`` overrides the policy's lock budget."""
        return UnitOfWork(self.engine, write=True, patience_s=patience_s)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url.render_as_string(hide_password=True)!r})"
