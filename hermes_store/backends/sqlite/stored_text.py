"""Stored text comes back as text, even where the file holds bytes that are not UTF-8.

SQLite stores whatever bytes it is given in a TEXT column: bit rot, or another
program writing through a C API, can leave a message with one byte that is not
UTF-8. The DB-API module decodes every TEXT value strictly, so that one byte
made every read of the session (and every listing that showed it) fail with
"Could not decode to UTF-8", and ``recover`` dropped the message.

Each connection of the store decodes with :func:`decoder` instead (installed
by the engine's connect hook as the connection's ``text_factory``): valid
UTF-8 -- all but damaged rows -- takes the strict decode and nothing else;
a value that is not gets U+FFFD for each bad sequence, and a warning line
naming the file and the row (table, id, column). ``hermes-store check``
lists every such row, and ``check --repair`` rewrites each with the
replaced text.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

Connection = sqlite3.Connection

_log = logging.getLogger(__name__)

REPLACEMENT = "\ufffd"


def undecodable_schema(error: UnicodeDecodeError) -> str:
    """The damage detail for a schema text that is not UTF-8.

    SQLite's "malformed schema" message quotes the text it could not parse,
    and the driver decodes messages strictly: bytes that are not UTF-8 in
    ``sqlite_master`` surface as a decoding error from any statement that
    loads the schema, not as a corruption code.
    """
    return f"its schema text (sqlite_master) is not UTF-8 and cannot be parsed: {error}"


def decoder(database: str, path: str | None = None) -> Callable[[bytes], str]:
    """``database``'s connections' ``text_factory``: strict UTF-8, else replaced and logged.

    ``path`` (the file, absolute) lets the log line name the row the bad value
    is stored in (see :class:`_Locator`); without it the line names the file.
    """
    locate = _Locator(path)

    def decode(raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            text = raw.decode("utf-8", errors="replace")
            _log.warning(
                "%s holds a text that is not UTF-8 (%s, byte %d of %d: %r); read with U+FFFD "
                "in place of the bad bytes, starting %r; 'hermes-store check --repair' "
                "rewrites it",
                database,
                locate(raw),
                error.start,
                len(raw),
                raw[error.start : error.end],
                text[:60],
            )
            return text

    return decode


class _Locator:
    """Which row (table, id, column) holds a given bad value, for the log line.

    Asked only when a value fails to decode, on a read-only connection of its
    own (the store's is in the middle of a fetch); one scan per table, its
    comparisons in SQLite, and each answer is kept, so a damaged row read
    again costs no second scan. A value no row holds as it is (a snippet of
    it, an aggregate) is "a computed value".
    """

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._known: dict[bytes, str] = {}
        self._lock = threading.Lock()

    def __call__(self, raw: bytes) -> str:
        with self._lock:
            if raw not in self._known:
                if len(self._known) > 64:
                    self._known.clear()
                self._known[raw] = self._find(raw)
            return self._known[raw]

    def _find(self, raw: bytes) -> str:
        if self._path is None:
            return "row not looked up"
        uri = f"file:{urllib.parse.quote(self._path)}?mode=ro"
        try:
            connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error:
            return "row not looked up"
        try:
            tables = {table: _text_columns(connection, table) for table in UNDECODABLE_TABLES}
            connection.text_factory = bytes  # the ids as stored, whatever their bytes
            for table, columns in tables.items():
                if not columns:
                    continue
                quoted = ['"' + c.replace('"', '""') + '"' for c in columns]
                match = " OR ".join(f"CAST({q} AS BLOB) = ?1" for q in quoted)
                picks = ", ".join(f"CAST({q} AS BLOB) = ?1" for q in quoted)
                row = connection.execute(
                    f"SELECT id, {picks} FROM {table} WHERE {match} LIMIT 1", (raw,)
                ).fetchone()
                if row is not None:
                    column = columns[list(row[1:]).index(1)]
                    row_id = (
                        row[0].decode(errors="replace") if isinstance(row[0], bytes) else row[0]
                    )
                    return f"{table} id {row_id!r} column {column}"
            return "a computed value, not a stored one"
        except sqlite3.Error:
            return "row not looked up"
        finally:
            connection.close()


UNDECODABLE_TABLES = ("sessions", "messages")
"""The tables whose text ``check`` reads byte by byte: the sessions and their messages."""


def _text_columns(dbapi_connection: Connection, table: str) -> list[str]:
    """The columns of ``table`` that hold text (declared TEXT or without a type)."""
    rows = dbapi_connection.execute(f"PRAGMA table_info({table})").fetchall()
    return [str(row[1]) for row in rows if str(row[2]).upper() in ("TEXT", "")]


def _is_utf8(raw: bytes | None) -> bool:
    if raw is None:
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def undecodable_rows(dbapi_connection: Connection) -> list[dict[str, Any]]:
    """Every text value of sessions and messages that is not UTF-8: table, id, column.

    The file's own bytes are read (``CAST(... AS BLOB)``), so the decoder's
    replacement cannot hide them; only values with a byte above 0x7F can be
    bad, and only those are handed to Python.
    """
    dbapi_connection.create_function("hermes_is_utf8", 1, _is_utf8, deterministic=True)
    found: list[dict[str, Any]] = []
    for table in UNDECODABLE_TABLES:
        for column in _text_columns(dbapi_connection, table):
            quoted = '"' + column.replace('"', '""') + '"'
            rows = dbapi_connection.execute(
                f"SELECT id FROM {table} WHERE typeof({quoted}) = 'text' "
                f"AND NOT hermes_is_utf8(CAST({quoted} AS BLOB)) ORDER BY id"
            ).fetchall()
            found.extend({"table": table, "id": row[0], "column": column} for row in rows)
    return found


def rewrite_undecodable(dbapi_connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Store each value of ``rows`` again as the text it reads as (U+FFFD for bad bytes).

    Run inside the caller's write transaction; the search indexes follow the
    rewrite through their triggers.
    """
    for row in rows:
        table, column = row["table"], row["column"]
        quoted = '"' + column.replace('"', '""') + '"'
        (raw,) = dbapi_connection.execute(
            f"SELECT CAST({quoted} AS BLOB) FROM {table} WHERE id = ?", (row["id"],)
        ).fetchone()
        dbapi_connection.execute(
            f"UPDATE {table} SET {quoted} = ? WHERE id = ?",
            (bytes(raw).decode("utf-8", errors="replace"), row["id"]),
        )
