"""The profiling findings' proposed fixes, as monkeypatches, to measure them before anyone
edits the package: ``python -m bench --try-fix NAME[,NAME...]`` (store side only).

Nothing imports this module unless ``--try-fix`` is given (child processes get the
names through ``BENCH_TRY_FIX``). Each patch reaches into hermes_store internals as
they were when it was written, so it may stop applying as the package changes; that
is fine, it is a measuring aid, not part of the benchmark.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

ENV = "BENCH_TRY_FIX"


def fast_rows() -> None:
    """messages.for_session: fetchall() + dict(zip(keys, row)) instead of dict(RowMapping)
    per row; facade._decoded without the generic three-field loop."""
    import hermes_store.facade as facade
    import hermes_store.repositories.messages as messages

    statement = messages._FOR_SESSION

    def for_session(self: Any, session_id: str) -> list[dict[str, Any]]:
        result = self._c.execute(statement, {"p_id": session_id})
        keys = tuple(result.keys())
        return [dict(zip(keys, row, strict=True)) for row in result.fetchall()]

    decode = facade.decode_json

    def decoded(message: dict[str, Any]) -> dict[str, Any]:
        if message["tool_calls"]:
            message["tool_calls"] = decode(message["tool_calls"])
        if message["reasoning_details"]:
            message["reasoning_details"] = decode(message["reasoning_details"])
        if message["codex_reasoning_items"]:
            message["codex_reasoning_items"] = decode(message["codex_reasoning_items"])
        return message

    messages.MessageRepository.for_session = for_session
    facade._decoded = decoded


def driver_append() -> None:
    """The append hot path (INSERT message, bump counters) as prepared SQL on the DBAPI
    connection of the unit of work, and a turn as ONE multi-row INSERT ... RETURNING id."""
    import hermes_store.repositories.messages as messages
    import hermes_store.repositories.sessions as sessions

    fields = messages.MESSAGE_FIELDS
    one = "(" + ", ".join("?" * len(fields)) + ")"
    insert = f"INSERT INTO messages ({', '.join(fields)}) VALUES "
    bump = (
        "UPDATE sessions SET message_count = COALESCE(message_count, 0) + ?, "
        "tool_call_count = COALESCE(tool_call_count, 0) + ? WHERE id = ?"
    )

    def add(self: Any, row: dict[str, Any]) -> int:
        dbapi = self._c.connection.driver_connection
        return int(dbapi.execute(insert + one, [row[f] for f in fields]).lastrowid)

    def add_many(self: Any, rows: list[dict[str, Any]]) -> list[int]:
        if not rows:
            return []
        dbapi = self._c.connection.driver_connection
        sql = insert + ", ".join([one] * len(rows)) + " RETURNING id"
        params = [row[f] for row in rows for f in fields]
        # Under the write lock AUTOINCREMENT ids of one statement ascend in row order.
        return sorted(r[0] for r in dbapi.execute(sql, params).fetchall())

    def bump_counters(self: Any, session_id: str, count: int, tool_calls: int) -> bool:
        dbapi = self._c.connection.driver_connection
        return dbapi.execute(bump, (count, tool_calls, session_id)).rowcount > 0

    messages.MessageRepository.add = add
    messages.MessageRepository.add_many = add_many
    sessions.SessionRepository.bump_counters = bump_counters


def sticky_connection() -> None:
    """UnitOfWork keeps one Connection per engine and thread and only begins/commits on it:
    no pool checkout, checkin and reset-on-return per call. (The real fix must also move
    the every-50-commits checkpoint from 'checkin' to after commit and close the
    connection in Store.close; this patch skips both, which is fine for measuring.)"""
    from sqlalchemy.util import immutabledict

    import hermes_store.uow as uow
    from hermes_store.engine import PATIENCE_OPTION, READ_OPTION
    from hermes_store.repositories import (
        MessageRepository,
        SearchRepository,
        SessionRepository,
    )

    def enter(self: Any) -> Any:
        local = self._engine.__dict__.setdefault("_bench_sticky", threading.local())
        connection = getattr(local, "connection", None)
        if connection is None or connection.closed:
            connection = local.connection = self._engine.connect()
        options: dict[str, Any] = {READ_OPTION: not self._write}
        if self._patience_s is not None:
            options[PATIENCE_OPTION] = self._patience_s
        connection._execution_options = immutabledict(options)
        self._transaction = connection.begin()
        self._connection = connection
        self.sessions = SessionRepository(connection)
        self.messages = MessageRepository(connection)
        self.search = SearchRepository(connection)
        return self

    def leave(self: Any, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()
        self._connection = None

    uow.UnitOfWork.__enter__ = enter
    uow.UnitOfWork.__exit__ = leave


def cheap_open() -> None:
    """migrate.read_state from sqlite_master by driver SQL instead of an Inspector, and
    sessions.get as a text statement (no 26-column select to compile per new engine)."""
    from sqlalchemy import text

    import hermes_store.migrate as migrate
    import hermes_store.repositories.sessions as sessions

    def read_state(connection: Any) -> tuple[int | None, str | None]:
        names = {
            row[0]
            for row in connection.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name IN ('schema_version', 'alembic_version')"
            )
        }
        version = revision = None
        if "schema_version" in names:
            raw = connection.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
            version = None if raw is None else int(raw)
        if "alembic_version" in names:
            revision = connection.exec_driver_sql(
                "SELECT version_num FROM alembic_version"
            ).scalar()
        return version, revision

    migrate.read_state = read_state
    sessions._GET = text("SELECT * FROM sessions WHERE id = :p_id")


PROPOSALS: dict[str, Callable[[], None]] = {
    "fast_rows": fast_rows,
    "driver_append": driver_append,
    "sticky_connection": sticky_connection,
    "cheap_open": cheap_open,
}


def apply(names: str) -> list[str]:
    """Apply the comma-separated proposals; returns their names."""
    chosen = [n for n in names.split(",") if n]
    unknown = [n for n in chosen if n not in PROPOSALS]
    if unknown:
        raise SystemExit(f"unknown fix(es): {', '.join(unknown)}; known: {', '.join(PROPOSALS)}")
    for name in chosen:
        PROPOSALS[name]()
    return chosen


def apply_from_env(impl_name: str) -> None:
    """In a child process: apply what the parent was asked to try, for the store only."""
    names = os.environ.get(ENV)
    if names and impl_name == "store":
        apply(names)
