"""After ``os.fork()`` the child opens its own SQLite connections, never its parent's.

SQLite documents carrying an open connection across ``fork`` as a way to
corrupt a file, and stores on one database share one engine per process --
so a child inherits the parent's pool and its threads' kept connections.
Each connection is marked with the process that opened it (an SQLAlchemy
``connect`` event on the store's engine) and the child reports the marks of
the connections its units of work ran on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from hermes_store import SessionDB, Store
from hermes_store.backends import create_store_engine
from hermes_store.backends.location import sqlite_url
from hermes_store.uow.connections import ThreadConnections
from tests.support.forked import run_forked

pytestmark = pytest.mark.sqlite_only("SQLite connections carried across fork")


def _mark_connections_with_their_process(store: Store) -> None:
    @event.listens_for(store.engine, "connect")
    def _mark(_dbapi_connection: Any, record: Any) -> None:
        record.info["opened_in"] = os.getpid()


def _opened_here(store: Store, *, write: bool) -> list[bool]:
    """Whether a unit, and a unit inside it (a spare connection), ran on this process's own."""
    with store.write() if write else store.read() as outer, store.read() as inner:
        return [
            outer.connection.info.get("opened_in") == os.getpid(),
            inner.connection.info.get("opened_in") == os.getpid(),
        ]


def test_a_child_never_runs_a_unit_on_a_connection_its_parent_opened(db_path: Path) -> None:
    store = Store(db_path)
    _mark_connections_with_their_process(store)
    db = SessionDB(store=store)
    db.create_session("s", "cli")
    # The parent's thread now keeps a connection, and a spare sits idle in the pool.
    _opened_here(store, write=True)

    def child() -> list[bool]:
        again = Store(db_path)  # the same engine: stores on one database share it
        marks = _opened_here(again, write=False) + _opened_here(again, write=True)
        SessionDB(store=again).append_message("s", "user", "written by the child")
        return marks

    assert run_forked(child) == ("ok", [True] * 4)
    assert [m["content"] for m in db.get_messages("s")] == ["written by the child"]
    db.append_message("s", "user", "the parent goes on")  # its own connections still work
    assert db.get_session("s")["message_count"] == 2
    store.close()


def test_thread_connections_never_hand_a_child_the_connection_its_parent_kept(
    db_path: Path,
) -> None:
    """The kept-connection check on its own, on an engine no store registered for forks."""
    Store(db_path).close()
    engine = create_store_engine(sqlite_url(db_path))
    connections = ThreadConnections(engine)
    parent_connection, kept = connections.acquire()
    assert kept is not None
    parent_connection.exec_driver_sql("SELECT 1")  # used, then back to idle-but-kept
    connections.release(parent_connection, kept)

    def child() -> bool:
        connection, kept_in_child = connections.acquire()
        try:
            return connection is not parent_connection and kept_in_child is not None
        finally:
            connections.release(connection, kept_in_child)

    assert run_forked(child) == ("ok", True)
    again, _kept = connections.acquire()
    assert again is parent_connection, "the parent keeps its own"
    connections.release(again, _kept)
    connections.close_all()
    engine.dispose()
