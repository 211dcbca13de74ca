"""A SQLite file replaced under an open store: followed when it is a store, else refused.

Another program (a restore, a sync tool, the agent's own recovery) may move a
new file to the store's path while the store has the old one open. Each
connection knows which files it opened (:mod:`.file_identity`); before a unit
of work runs on it, :class:`ReplacementWatch` moves it to the file now at the
path if that is a hermes_store database at the head schema, fit to be used by
this user (:mod:`.private_files`), or refuses it with
:class:`~hermes_store.errors.StoreReplacedError`. A connection made by name
after the swap opens whatever is there, so it is held to the same checks.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection, Engine

from hermes_store.backends.sqlite.engine import OPENED_FILES
from hermes_store.backends.sqlite.file_identity import OpenedFiles
from hermes_store.backends.sqlite.private_files import (
    UnsafeDatabasePathError,
    require_fit_replacement,
)
from hermes_store.errors import StoreError, StoreReplacedError
from hermes_store.schema.state import file_is_current, is_current_on

_log = logging.getLogger("hermes_store")


class ReplacementWatch:
    """One engine's watch over its file: the file the store uses, and each one it followed."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._adopted: OpenedFiles | None = None
        """The file the store uses: the one it first opened, then each replacement
        it followed (see :meth:`_unadopted`)."""

    def follow(
        self,
        connection: Connection,
        adopting: Callable[[str], None] | None,
        on_replaced: Callable[[], None] | None,
        info: dict[Any, Any] | None = None,
    ) -> None:
        """Move ``connection`` to the file now at the path if its file was replaced, or refuse.

        ``info`` is ``connection.info`` where the caller holds it already.

        ``adopting`` is called with the path once a replacement proved to be a
        store, before it is used (a writable store makes it private there);
        ``on_replaced`` once connections moved (the store forgets the old
        file's layout).
        """
        opened = (connection.info if info is None else info).get(OPENED_FILES)
        if opened is None:
            return
        moved_from = opened if opened.replaced() else self._unadopted(opened)
        if moved_from is not None:
            self._follow_replacement(connection, moved_from, adopting, on_replaced)

    def _unadopted(self, opened: OpenedFiles) -> OpenedFiles | None:
        """What the store used, when ``opened`` (a connection made by name) holds another file.

        A connection made after the file was replaced opens whatever is at the
        path; that file has to pass the same checks as one a connection finds
        replaced, or another user's file swapped in would be written by every
        thread that connects after the swap.
        """
        adopted = self._adopted  # one attribute read: the lock only for the first connection
        if adopted is not None:
            return None if adopted.database == opened.database else adopted
        with self._lock:
            if self._adopted is None:
                self._adopted = opened  # the store's first connection: the file it opened
            adopted = self._adopted
        return None if adopted.database == opened.database else adopted

    def _follow_replacement(
        self,
        connection: Connection,
        opened: OpenedFiles,
        adopting: Callable[[str], None] | None,
        on_replaced: Callable[[], None] | None,
    ) -> None:
        """Move ``connection`` from a replaced file to the one at the path, or refuse."""
        path = opened.path
        if not os.path.exists(path):
            raise StoreReplacedError(
                f"{path} was moved away or deleted while this store had it open; nothing "
                "was written (put the store back at that path, or reopen it elsewhere)"
            )
        try:
            require_fit_replacement(Path(path), opened.owner)
        except UnsafeDatabasePathError as error:
            self._refuse(connection, opened, f"{error}; nothing was written to either")
        if file_is_current(path) is False:
            self._refuse(connection, opened)
        detached = opened.detach_sidecars()
        connection.invalidate()  # the old file is closed; SQLite leaves a moved file's WAL alone
        self._engine.pool.dispose()  # idle pooled connections hold the old file too
        fresh = connection.info.get(OPENED_FILES)  # reconnects, to the file at the path
        try:
            current = (
                fresh is not None
                and not fresh.replaced()
                and fresh.owner in (os.geteuid(), opened.owner)  # the file checked above
                and is_current_on(connection)
            )
        except StoreError:
            current = False
        finally:
            if connection.in_transaction():
                connection.rollback()
        if not current:
            self._refuse(connection, opened)
        if adopting is not None:
            try:
                adopting(path)
            except OSError as error:
                self._refuse(connection, opened, f"{path} could not be made private ({error})")
        with self._lock:
            self._adopted = fresh
        if on_replaced is not None:
            on_replaced()
        _log.warning(
            "%s was replaced while the store had it open; now using the new file "
            "(the old one's sidecars unlinked: %s)",
            path,
            ", ".join(detached) or "none",
        )

    @staticmethod
    def _refuse(connection: Connection, opened: OpenedFiles, why: str | None = None) -> None:
        # Sticky: the next unit checks again instead of using that file (and the
        # owner it must have stays the one of the file the store first opened).
        connection.info[OPENED_FILES] = OpenedFiles(opened.path, None, None, None, opened.owner)
        raise StoreReplacedError(
            why
            or f"{opened.path} was replaced by a file that is not a hermes_store database at "
            "the head schema; nothing was written to either (reopen the store to adopt it)"
        )
