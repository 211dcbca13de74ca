"""A plain-``sqlite3`` replica of the Hermes agent's own append, for the agent-file rows.

What the agent's ``hermes_state.SessionDB.append_message`` does on its files
(its public code, read with the search tools; nothing of it is copied): on
one long-lived connection, ``BEGIN IMMEDIATE``; at schema 25, the two guards
(no append under another process's live compression lock, none to a session
that ended by compression); one INSERT naming the columns of its version
(v25 also writes ``observed = 0`` and ``active = 1``); the counter UPDATE;
``COMMIT``. Retries and the periodic checkpoint are the document's
(:class:`bench.micro.plain.PlainSessionDB`, which this extends), as the agent's
writes share that loop. ``message_count()`` is its bare ``SELECT COUNT(*)``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .plain import PlainSessionDB, _call_count

_BASE = (
    "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
    "timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content",
    "reasoning_details", "codex_reasoning_items",
)  # fmt: skip
_V25 = (
    "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
    "effect_disposition", "timestamp", "token_count", "finish_reason", "reasoning",
    "reasoning_content", "reasoning_details", "codex_reasoning_items",
    "codex_message_items", "platform_message_id", "observed", "active", "api_content",
    "display_kind", "display_metadata",
)  # fmt: skip


def insert_columns(version: int) -> tuple[str, ...]:
    """The columns the agent's INSERT names at ``version``."""
    if version < 9:
        return _BASE
    if version < 25:
        return (*_BASE, "codex_message_items")
    return _V25


class CompressionRefused(RuntimeError):
    """The agent's refusal: the session is being compressed, or ended by compression."""


class AgentPlainDB(PlainSessionDB):
    """The agent's append and counts on a file of its own layout (schema 10, 11 or 25)."""

    def __init__(self, db_path: str | Path) -> None:
        super().__init__(db_path)
        self.version = int(self._conn.execute("SELECT version FROM schema_version").fetchone()[0])
        columns = insert_columns(self.version)
        self._columns = columns
        self._insert = (
            f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        )

    def append_message(self, session_id: str, role: str, **fields: Any) -> int:
        tool_calls = fields.get("tool_calls")
        now = time.time()
        values = {
            "session_id": session_id,
            "role": role,
            "content": fields.get("content"),
            "tool_call_id": fields.get("tool_call_id"),
            "tool_calls": json.dumps(tool_calls) if tool_calls else None,
            "tool_name": fields.get("tool_name"),
            "timestamp": now,
            "token_count": fields.get("token_count"),
            "finish_reason": fields.get("finish_reason"),
            "reasoning": fields.get("reasoning"),
            "reasoning_details": _json(fields.get("reasoning_details")),
            "codex_reasoning_items": _json(fields.get("codex_reasoning_items")),
            "observed": 0,
            "active": 1,
        }
        row = tuple(values.get(name) for name in self._columns)
        calls = _call_count(tool_calls)
        guarded = self.version >= 25

        def do(conn: sqlite3.Connection) -> int:
            if guarded:
                _admit(conn, session_id, now)
            cursor = conn.execute(self._insert, row)
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, "
                "tool_call_count = tool_call_count + ? WHERE id = ?",
                (calls, session_id),
            )
            return int(cursor.lastrowid)  # type: ignore[arg-type]

        return int(self._execute_write(do))

    def message_count(self, session_id: str | None = None) -> int:
        with self._lock:
            if session_id:
                cursor = self._conn.execute(
                    "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
                )
            else:
                cursor = self._conn.execute("SELECT COUNT(*) FROM messages")
            return int(cursor.fetchone()[0])


def _json(value: Any) -> str | None:
    return json.dumps(value) if value else None


def _admit(conn: sqlite3.Connection, session_id: str, now: float) -> None:
    """The agent's v25 guards, as two reads inside the write transaction."""
    lock = conn.execute(
        "SELECT holder, expires_at FROM compression_locks WHERE session_id = ?", (session_id,)
    ).fetchone()
    if lock is not None and float(lock[1]) > now:
        raise CompressionRefused(f"session {session_id!r} is being compressed")
    ended = conn.execute(
        "SELECT ended_at, end_reason FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if ended is not None and ended[0] is not None and ended[1] == "compression":
        raise CompressionRefused(f"session {session_id!r} ended by compression")
