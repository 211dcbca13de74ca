"""The two implementations behind one small interface the workloads call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class Impl:
    name: str

    def open(self, path: Path) -> Any:
        raise NotImplementedError

    def append_turn(self, db: Any, session_id: str, turn: Sequence[Mapping[str, Any]]) -> None:
        raise NotImplementedError


class Plain(Impl):
    """The old design: every message its own BEGIN IMMEDIATE ... COMMIT."""

    name = "plain"

    def open(self, path: Path) -> Any:
        from .plain import PlainSessionDB

        return PlainSessionDB(path)

    def append_turn(self, db: Any, session_id: str, turn: Sequence[Mapping[str, Any]]) -> None:
        for message in turn:
            db.append_message(session_id, **message)


class PlainOneTransaction(Plain):
    """The floor for a turn: the store's SQL (one transaction, one multi-row INSERT) on sqlite3."""

    name = "plain_tx"

    def append_turn(self, db: Any, session_id: str, turn: Sequence[Mapping[str, Any]]) -> None:
        db.append_messages(session_id, turn)


def wal_like_plain(path: Path | str) -> Path:
    """Put the file in WAL before the store opens it, as plain's files are.

    On a SQLite library with the WAL-reset bug the store keeps a new file out of
    WAL (and the bench's templates, made by the store, are then out of WAL too);
    run on such a library (``HERMES_STORE_SQLITE=system``) to compare the
    libraries, the store would then not be compared like for like. A file in
    WAL stays in WAL on every library, so the bench switches it first.
    """
    from hermes_store.backends.sqlite.library import AFFECTED, driver

    path = Path(path)
    if AFFECTED:
        connection = driver.connect(path)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.close()
    return path


class StoreImpl(Impl):
    """hermes_store.SessionDB; a turn is one unit of work (append_messages)."""

    name = "store"

    def open(self, path: Path) -> Any:
        from hermes_store import SessionDB

        return SessionDB(wal_like_plain(path))

    def append_turn(self, db: Any, session_id: str, turn: Sequence[Mapping[str, Any]]) -> None:
        db.append_messages(session_id, turn)


class StoreNormalDurability(StoreImpl):
    """The store with ``durability="normal"``: no disk flush per commit (info rows only).

    Not a like-for-like contender -- plain flushes every commit -- but the
    measured price of the default's guarantee, for whoever chooses.
    """

    name = "store_normal"

    def open(self, path: Path) -> Any:
        from hermes_store import SessionDB

        return SessionDB(wal_like_plain(path), durability="normal")


class AgentPlain(Plain):
    """A plain-sqlite3 replica of the agent's own append (:mod:`bench.micro.agent_plain`)."""

    name = "agent"

    def open(self, path: Path) -> Any:
        from .agent_plain import AgentPlainDB

        return AgentPlainDB(path)


IMPLS: dict[str, Impl] = {
    "agent": AgentPlain(),
    "plain": Plain(),
    "plain_tx": PlainOneTransaction(),
    "store": StoreImpl(),
    "store_normal": StoreNormalDurability(),
}
