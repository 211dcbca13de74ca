"""The baseline: the old hand-written ``sqlite3`` store, for the operations we time.

It follows the design document (``hermes_state.SessionDB``): one connection
per object with ``isolation_level=None`` (the driver opens no transactions of
its own), WAL, foreign keys on, a 1 s busy timeout, ``sqlite3.Row`` rows
turned into dicts; every write is ``BEGIN IMMEDIATE`` ... ``COMMIT`` retried up
to 15 times with 20-150 ms of random jitter, and a PASSIVE checkpoint every 50
writes. The SQL is the document's. It only opens files already at schema version
6 or later (the benchmark never needs its migrations).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

SCHEMA_VERSION = 6
"""The old code's version; like it, the baseline reads any newer file (it checks ``<``)."""


def sanitize_fts5_query(query: str) -> str:
    """The old store's sanitizer: keep balanced phrases, strip FTS5 operators, quote a-b."""
    phrases: list[str] = []

    def keep(match: re.Match[str]) -> str:
        phrases.append(match.group(0))
        return f"\x00Q{len(phrases) - 1}\x00"

    text = re.sub(r'"[^"]*"', keep, query)
    text = re.sub(r'[+{}()"^]', " ", text)
    text = re.sub(r"\*+", "*", text)
    text = re.sub(r"(^|\s)\*", r"\1", text)
    text = re.sub(r"(?i)^(AND|OR|NOT)\b\s*", "", text.strip())
    text = re.sub(r"(?i)\s+(AND|OR|NOT)\s*$", "", text.strip())
    text = re.sub(r"\b(\w+(?:[-.]\w+)+)\b", r'"\1"', text)
    for index, phrase in enumerate(phrases):
        text = text.replace(f"\x00Q{index}\x00", phrase)
    return text.strip()


class PlainSessionDB:
    _WRITE_MAX_RETRIES = 15
    _WRITE_RETRY_MIN_S = 0.020
    _WRITE_RETRY_MAX_S = 0.150
    _CHECKPOINT_EVERY_N_WRITES = 50

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        self._lock = threading.Lock()
        self._write_count = 0
        self.retries = 0
        self._conn = sqlite3.connect(
            str(self.db_path), check_same_thread=False, timeout=1.0, isolation_level=None
        )
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        row = self._conn.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
        if row is None or row[0] < SCHEMA_VERSION:
            # The old code would migrate here; the benchmark only opens current files.
            self._conn.close()
            raise RuntimeError(f"baseline opens only schema version >= {SCHEMA_VERSION} files")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]

    # -- writes ----------------------------------------------------------
    def _execute_write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        last_error: Exception | None = None
        for attempt in range(self._WRITE_MAX_RETRIES):
            try:
                with self._lock:
                    self._conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(self._conn)
                        self._conn.execute("COMMIT")
                    except BaseException:
                        try:  # noqa: SIM105 -- the old code's shape, and no suppress() cost
                            self._conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                        raise
                self._write_count += 1
                if self._write_count % self._CHECKPOINT_EVERY_N_WRITES == 0:
                    self._try_wal_checkpoint()
                return result
            except sqlite3.OperationalError as error:
                message = str(error).lower()
                if "locked" in message or "busy" in message:
                    last_error = error
                    if attempt < self._WRITE_MAX_RETRIES - 1:
                        self.retries += 1
                        time.sleep(random.uniform(self._WRITE_RETRY_MIN_S, self._WRITE_RETRY_MAX_S))
                        continue
                raise
        raise last_error or sqlite3.OperationalError("database is locked after max retries")

    def _try_wal_checkpoint(self) -> None:
        try:
            with self._lock:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            pass

    def create_session(
        self, session_id: str, source: str, model: str | None = None, **extra: Any
    ) -> str:
        def do(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO sessions (id, source, user_id, model, model_config, "
                "system_prompt, parent_session_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    source,
                    extra.get("user_id"),
                    model,
                    json.dumps(extra["model_config"]) if extra.get("model_config") else None,
                    extra.get("system_prompt"),
                    extra.get("parent_session_id"),
                    time.time(),
                ),
            )

        self._execute_write(do)
        return session_id

    def append_message(self, session_id: str, role: str, **fields: Any) -> int:
        """The documented ``append_message``; ``fields`` are its keyword arguments."""

        def do(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(_INSERT_MESSAGE, _message_values(session_id, role, **fields))
            _bump_counters(conn, session_id, 1, _call_count(fields.get("tool_calls")))
            return int(cursor.lastrowid)  # type: ignore[arg-type]

        return self._execute_write(do)

    def append_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Not in the old code: a whole turn in one BEGIN IMMEDIATE ... COMMIT.

        The benchmark's floor for the store's ``append_messages``: the store's
        SQL -- the counter UPDATE and one multi-row INSERT (one FTS5 segment
        per index for the turn, see ``hermes_store.repositories.messages``) --
        in one transaction, with no Python layers around it.
        """

        def do(conn: sqlite3.Connection) -> list[int]:
            rows = [_message_values(session_id, **message) for message in messages]
            calls = sum(_call_count(message.get("tool_calls")) for message in messages)
            _bump_counters(conn, session_id, len(rows), calls)
            placeholders = ", ".join([_ONE_ROW] * len(rows))
            cursor = conn.execute(
                f"{_INSERT_HEAD} VALUES {placeholders}", [v for row in rows for v in row]
            )
            last = int(cursor.lastrowid)  # type: ignore[arg-type]
            return list(range(last - len(rows) + 1, last + 1))

        return self._execute_write(do)

    # -- reads -----------------------------------------------------------
    def get_session(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT * FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        return dict(row) if row else None

    def get_messages(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM messages WHERE session_id = ? ORDER BY timestamp, id",
                (session_id,),
            ).fetchall()
        result = []
        for row in rows:
            message = dict(row)
            if message.get("tool_calls"):
                try:  # noqa: SIM105 -- as the old code; cheaper than contextlib.suppress
                    message["tool_calls"] = json.loads(message["tool_calls"])
                except (json.JSONDecodeError, TypeError):
                    pass
            result.append(message)
        return result

    def search_messages(self, query: str, limit: int = 20, offset: int = 0) -> list[dict[str, Any]]:
        fts_query = sanitize_fts5_query(query)
        if not fts_query:
            return []
        sql = """
            SELECT m.id, m.session_id, m.role,
                   snippet(messages_fts, 0, '>>>', '<<<', '...', 40) AS snippet,
                   m.content, m.timestamp, m.tool_name,
                   s.source, s.model, s.started_at AS session_started
            FROM messages_fts
            JOIN messages m ON m.id = messages_fts.rowid
            JOIN sessions s ON s.id = m.session_id
            WHERE messages_fts MATCH ?
            ORDER BY rank
            LIMIT ? OFFSET ?
        """
        with self._lock:
            try:
                matches = [dict(r) for r in self._conn.execute(sql, (fts_query, limit, offset))]
            except sqlite3.OperationalError:
                return []
        for match in matches:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT role, content FROM messages "
                    "WHERE session_id = ? AND id >= ? - 1 AND id <= ? + 1 ORDER BY id",
                    (match["session_id"], match["id"], match["id"]),
                ).fetchall()
            match["context"] = [
                {"role": r["role"], "content": (r["content"] or "")[:200]} for r in rows
            ]
            match.pop("content", None)
        return matches

    def list_sessions(self, source: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            if source is None:
                rows = self._conn.execute(
                    "SELECT * FROM sessions ORDER BY started_at DESC"
                ).fetchall()
            else:
                rows = self._conn.execute(
                    "SELECT * FROM sessions WHERE source = ? ORDER BY started_at DESC", (source,)
                ).fetchall()
        return [dict(r) for r in rows]

    def iter_export(self, source: str | None = None) -> Iterator[dict[str, Any]]:
        for session in self.list_sessions(source):
            yield {**session, "messages": self.get_messages(session["id"])}

    def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        return list(self.iter_export(source))


_INSERT_HEAD = (
    "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, "
    "tool_name, timestamp, token_count, finish_reason, reasoning, "
    "reasoning_details, codex_reasoning_items)"
)
_ONE_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_MESSAGE = f"{_INSERT_HEAD} VALUES {_ONE_ROW}"


def _message_values(
    session_id: str,
    role: str,
    content: str | None = None,
    tool_name: str | None = None,
    tool_calls: Any = None,
    tool_call_id: str | None = None,
    token_count: int | None = None,
    finish_reason: str | None = None,
    reasoning: str | None = None,
    reasoning_details: Any = None,
    codex_reasoning_items: Any = None,
) -> tuple[Any, ...]:
    """The old code's values for one message row, in ``_INSERT_HEAD``'s column order."""
    return (
        session_id,
        role,
        content,
        tool_call_id,
        json.dumps(tool_calls) if tool_calls else None,
        tool_name,
        time.time(),
        token_count,
        finish_reason,
        reasoning,
        json.dumps(reasoning_details) if reasoning_details else None,
        json.dumps(codex_reasoning_items) if codex_reasoning_items else None,
    )


def _call_count(tool_calls: Any) -> int:
    if tool_calls is None:
        return 0
    return len(tool_calls) if isinstance(tool_calls, list) else 1


def _bump_counters(conn: sqlite3.Connection, session_id: str, messages: int, calls: int) -> None:
    if calls > 0:
        conn.execute(
            "UPDATE sessions SET message_count = message_count + ?, "
            "tool_call_count = tool_call_count + ? WHERE id = ?",
            (messages, calls, session_id),
        )
    else:
        conn.execute(
            "UPDATE sessions SET message_count = message_count + ? WHERE id = ?",
            (messages, session_id),
        )
