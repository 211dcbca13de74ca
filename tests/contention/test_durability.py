"""Durability: every connection of a store syncs commits the way the store was asked to.

``full`` (the default) must reach SQLite as ``synchronous=FULL`` and
PostgreSQL as ``synchronous_commit=on`` on every connection, reads and writes
and other threads alike; ``normal`` as NORMAL / off. A wrong value is refused
before any file is made. (What ``normal`` keeps when the process is killed
is tested with real SIGKILLs in ``test_crash_safety.py``.)
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hermes_store import (
    ContentionPolicy,
    Durability,
    InvalidInputError,
    SessionDB,
    Store,
)
from hermes_store.uow.unit import UnitOfWork

_SQLITE_LEVELS = {2: "full", 1: "normal"}
_POSTGRESQL_LEVELS = {"on": "full", "off": "normal"}


def _durability_of(uow: UnitOfWork) -> str:
    """What the unit's own connection does at commit, read back from the database."""
    connection = uow.connection
    if connection.dialect.name == "sqlite":
        level = connection.exec_driver_sql("PRAGMA synchronous").scalar_one()
        return _SQLITE_LEVELS[level]
    setting = connection.exec_driver_sql("SHOW synchronous_commit").scalar_one()
    return _POSTGRESQL_LEVELS[setting]


def _in_other_thread(store: Store, *, write: bool = False) -> str:
    """The setting on a connection another thread gets (each thread keeps its own)."""
    seen: list[str] = []

    def read() -> None:
        with store.write() if write else store.read() as uow:
            seen.append(_durability_of(uow))

    worker = threading.Thread(target=read)
    worker.start()
    worker.join()
    return seen[0]


@pytest.mark.parametrize("asked", [None, "full", Durability.FULL, "normal", Durability.NORMAL])
def test_every_connection_syncs_as_asked(store_url: str, asked: str | None) -> None:
    expected = "full" if asked is None else str(asked)
    store = Store(store_url) if asked is None else Store(store_url, durability=asked)
    try:
        assert store.durability == expected
        with store.write() as uow:
            assert _durability_of(uow) == expected
        if store.engine.dialect.name == "postgresql":
            # Set per transaction (a pooler keeps no session settings), and only a
            # write has a commit to make durable; a read's is the server's default.
            assert _in_other_thread(store, write=True) == expected
            return
        with store.read() as uow:
            assert _durability_of(uow) == expected
        assert _in_other_thread(store) == expected
    finally:
        store.close()


def test_sessiondb_passes_durability_to_its_store(store_url: str) -> None:
    with SessionDB(store_url, durability="normal") as db:
        assert db.store.durability is Durability.NORMAL
        db.create_session("s1", "cli")
        message_id = db.append_message("s1", "user", content="kept in the OS cache first")
        with db.store.read() as uow:
            assert _durability_of(uow) == "normal"
        assert [m["id"] for m in db.get_messages("s1")] == [message_id]
    with SessionDB(store_url) as db:
        assert db.store.durability is Durability.FULL


def test_two_stores_on_one_file_keep_their_own_durability(db_path: Path) -> None:
    full, normal = Store(db_path), Store(db_path, durability="normal")
    try:
        assert full.engine is not normal.engine  # one engine per (file, policy, durability)
        with normal.write() as uow:
            uow.sessions.create("s1", "cli")
        with full.read() as uow:
            assert _durability_of(uow) == "full"
            assert uow.sessions.get("s1") is not None
        with normal.read() as uow:
            assert _durability_of(uow) == "normal"
    finally:
        full.close()
        normal.close()


@pytest.mark.parametrize("wrong", ["fast", "FULL ", "", "off", 2, None])
def test_an_unknown_durability_is_refused_before_any_file_is_made(
    db_path: Path, wrong: object
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        Store(db_path, durability=wrong)  # type: ignore[arg-type]
    message = str(refused.value)
    assert repr(wrong) in message
    assert "'full'" in message and "'normal'" in message
    assert not db_path.exists()
    with pytest.raises(InvalidInputError):
        SessionDB(db_path, durability=wrong if wrong is not None else "none")  # type: ignore[arg-type]
    assert not db_path.exists()


def test_settings_beside_a_given_store_are_refused(store_url: str) -> None:
    store = Store(store_url)
    try:
        with pytest.raises(
            InvalidInputError, match="durability, read_only and clock are the store's"
        ):
            SessionDB(store=store, durability="normal")
        with pytest.raises(InvalidInputError, match="policy, durability, read_only and clock"):
            SessionDB(store=store, policy=ContentionPolicy(patience_s=1.0))
        assert SessionDB(store=store).store is store
    finally:
        store.close()
