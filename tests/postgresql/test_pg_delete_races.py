"""Deletes racing writes on PostgreSQL: a foreign key broken between a check and a write.

Under READ COMMITTED a unit checks what is committed, then writes; another
transaction may commit in between. Here the other transaction is held open
for real (a unit of work of another thread, on its own connection) while the
racing call runs, then committed: the racing call must end as if it had begun
after that commit -- a store error naming what is wrong, or nothing deleted
that holds messages -- never the driver's ``IntegrityError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import URL

from hermes_store import InvalidInputError, SessionDB
from hermes_store.domain.messages import MessageIn


def _race(db: SessionDB, hold: Callable[[Any], None], call: Callable[[], Any]) -> Any:
    """``call()`` in a thread while a unit of this thread has done ``hold`` and not committed;
    the unit commits once ``call`` waits on its locks. ``call``'s result or exception."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except Exception as error:  # reported to the test, whatever it is
            outcome["error"] = error

    racer = threading.Thread(target=run)
    with db.store.write() as uow:
        hold(uow)
        racer.start()
        deadline = time.monotonic() + 10
        while not _waiting_on_a_lock(db) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert racer.is_alive(), outcome
    racer.join(30)
    return outcome.get("error", outcome.get("result"))


def _waiting_on_a_lock(db: SessionDB) -> bool:
    url = db.store.url.render_as_string(hide_password=False)
    with SessionDB(url) as watcher, watcher.store.read() as uow:
        waiting = uow.connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()
    return bool(waiting)


def test_an_empty_session_that_gets_a_message_meanwhile_is_not_deleted(pg_url: URL) -> None:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("quiet", "cli")
        got = _race(
            db,
            lambda uow: uow.messages.append("quiet", MessageIn(role="user", content="late")),
            lambda: db.delete_empty_sessions(grace_seconds=0),
        )
        assert got == 0, repr(got)
        assert [m["content"] for m in db.get_messages("quiet")] == ["late"]
        session = db.get_session("quiet")
        assert session is not None and session["message_count"] == 1


def test_a_child_whose_parent_is_deleted_meanwhile_is_a_named_error(pg_url: URL) -> None:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("parent", "cli")
        got = _race(
            db,
            lambda uow: uow.sessions.delete("parent"),
            lambda: db.create_session("child", "cli", parent_session_id="parent"),
        )
        assert isinstance(got, InvalidInputError) and "'parent'" in str(got), repr(got)
        assert db.get_session("child") is None and db.get_session("parent") is None
