"""Messages: appended with their counters, read back in order, cleared.

Append and read-back are the agent's hot paths, so their statements are
:class:`~hermes_store.backends.prepared.Prepared`: compiled once, run on the driver.

A batch of messages (a turn, an import) is one multi-row INSERT on SQLite,
not one INSERT per message: SQLite (3.40) opens a statement savepoint for
every statement that writes an FTS5 table, and FTS5 writes its pending index
data out as a new segment at each one. One statement per turn means one
segment per index per turn instead of one per message -- the same rows and
index, for far fewer instructions (design notes, "Hot paths and start-up").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, insert, literal_column, text
from sqlalchemy.engine import Connection

from hermes_store.backends import backend_of
from hermes_store.backends.layout import MESSAGE_COLUMNS, STANDARD, Layout
from hermes_store.backends.prepared import Prepared
from hermes_store.backends.shapes import (
    live_messages,
    message_columns,
    shadowed,
    writable_messages,
)
from hermes_store.domain.arguments import decode_json, number_arg, text_arg
from hermes_store.domain.messages import (
    JSON_FIELDS,
    CheckedMessage,
    MessageIn,
    conversation_entry,
    field_name,
    message_row,
    tool_call_total,
    turn_rows,
)
from hermes_store.domain.records import MessageRecord
from hermes_store.errors import InvalidInputError, SessionNotFoundError
from hermes_store.repositories.sessions import SessionRepository
from hermes_store.schema.tables import messages_table

M = messages_table

MESSAGE_FIELDS = tuple(column.name for column in M.columns if column.name != "id")
"""Every column a caller supplies; ``add`` expects all of them (None where absent)."""

BATCH_ROWS = 200
"""Rows per multi-row INSERT: 13 columns x 200 rows stays far below SQLite's 32,766 parameters."""

_CONVERSATION_FIELDS = (
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "finish_reason",
    "reasoning",
    "reasoning_details",
    "codex_reasoning_items",
)


@dataclass(frozen=True)
class _Statements:
    """The statements of one file layout (see :mod:`.shapes`), built once per layout."""

    layout: Layout
    fields: tuple[str, ...]
    """The documented columns an INSERT here writes (all of them on our own files)."""
    insert: Prepared
    insert_with_id: Prepared
    for_session: Prepared
    conversation: Prepared
    delete_for_session: Any
    count_all: Prepared
    """All rows, live or not: what the agent's own store reports for the whole file."""
    count_session: Prepared
    """One session's live rows (the agent's ``active`` flag hides the rest)."""
    kept_count: bool
    """Revision 0011 may keep the count of all messages here (its triggers count every row)."""

    def batch(self, rows: int, with_ids: bool) -> tuple[Prepared, tuple[str, ...]]:
        return _batch_insert(self.layout, rows, with_ids)


def _constants(layout: Layout) -> dict[str, Any]:
    """Values every row of this layout carries without the caller: ``active = 1`` (agent v12+)."""
    return {"active": literal_column("1")} if layout.tracks_active else {}


@lru_cache(maxsize=16)
def statements_for(layout: Layout) -> _Statements:
    target, fields = writable_messages(layout)
    constants = _constants(layout)
    select_list = message_columns(layout)
    order = " ORDER BY m.timestamp, m.id"
    live = live_messages(layout)
    conversation = ", ".join(f"m.{name}" for name in _CONVERSATION_FIELDS)

    def read(sql: str) -> Any:
        return text(shadowed(sql, layout))

    return _Statements(
        layout=layout,
        fields=fields,
        insert=Prepared(insert(target).values(**constants), column_keys=fields),
        # Imports and copies keep the ids they bring (search hits and exports name them).
        insert_with_id=Prepared(insert(target).values(**constants), column_keys=("id", *fields)),
        for_session=Prepared(
            read(f"SELECT {select_list} FROM messages m WHERE m.session_id = :p_id{live}{order}")
        ),
        conversation=Prepared(
            read(f"SELECT {conversation} FROM messages m WHERE m.session_id = :p_id{live}{order}")
        ),
        delete_for_session=text("DELETE FROM messages WHERE session_id = :p_id"),
        # Every row, as the agent's own message_count() counts on its files: a bare
        # COUNT(*) reads the smallest index, where a filter on ``active`` reads the table.
        count_all=Prepared(text("SELECT COUNT(*) FROM messages")),
        count_session=Prepared(
            text(f"SELECT COUNT(*) FROM messages m WHERE m.session_id = :p_id{live}")
        ),
        kept_count=layout.kept_totals,
    )


@lru_cache(maxsize=64)
def _batch_insert(layout: Layout, rows: int, with_ids: bool) -> tuple[Prepared, tuple[str, ...]]:
    """A ``rows``-row INSERT and its columns; its values go in row by row, column by column."""
    target, fields = writable_messages(layout)
    columns = ("id", *fields) if with_ids else fields
    constants = _constants(layout)
    values = [
        {
            **{name: bindparam(f"r{i}_{name}", type_=target.c[name].type) for name in columns},
            **constants,
        }
        for i in range(rows)
    ]
    order = [bind.key for row in values for name, bind in row.items() if name not in constants]
    return Prepared(insert(target).values(values), order=order), columns


_STANDARD = statements_for(STANDARD)


def insert_rows(
    connection: Connection, layout: Layout, rows: Sequence[dict[str, Any]]
) -> list[int]:
    """Insert stored rows as they are (JSON as its text) and return their ids, in order.

    No rule is applied and no counter moves: this is for the tools that move
    whole stores (recover, which recomputes the counters after; copy and
    import through :meth:`MessageRepository.restore`, which keep them) and
    for the repository's own appends below.

    On SQLite, rows that all carry an ``id`` or all lack one go in
    multi-row INSERTs of up to :data:`BATCH_ROWS` (see the module's
    docstring). Without ids, the rows of one statement get consecutive
    ids ending at the statement's ``lastrowid``: an AUTOINCREMENT table
    numbers the rows of one INSERT one after another, and the write lock
    lets no other writer in between. Mixed rows, and other backends, are
    inserted one by one.
    """
    statements = _STANDARD if layout is STANDARD else statements_for(layout)

    def one(row: dict[str, Any]) -> int:
        chosen = statements.insert_with_id if row.get("id") is not None else statements.insert
        return chosen.inserted_id(connection, row)

    if len(rows) < 2 or not backend_of(connection).batches_inserts:
        return [one(row) for row in rows]
    carried = [row.get("id") is not None for row in rows]
    if any(carried) and not all(carried):
        return [one(row) for row in rows]
    with_ids = carried[0]
    ids: list[int] = []
    for start in range(0, len(rows), BATCH_ROWS):
        chunk = rows[start : start + BATCH_ROWS]
        statement, columns = statements.batch(len(chunk), with_ids)
        last = statement.last_rowid(connection, [row[name] for row in chunk for name in columns])
        if with_ids:
            ids.extend(int(row["id"]) for row in chunk)
        else:
            ids.extend(range(last - len(chunk) + 1, last + 1))
    return ids


class MessageRepository:
    """A session's messages: appended with their counters, read back in order.

    Every write checks its fields first (InvalidInputError naming the field,
    nothing written), moves the session's ``message_count`` and
    ``tool_call_count`` with the rows in the same unit of work, and raises
    SessionNotFoundError for an unknown session: a service writing through
    this repository cannot leave a counter behind its rows. Reads give
    :class:`~hermes_store.domain.records.MessageRecord` with JSON decoded.

    On a file of the agent's later schema versions, columns it added are
    left to their defaults (``active`` is set to 1, as the agent's code sets
    it), an append to a session under another process's compression lock is
    refused, and reads return the agent's live rows.
    """

    def __init__(
        self,
        connection: Connection,
        layout: Layout = STANDARD,
        sessions: SessionRepository | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._c = connection
        self._layout = layout
        self._s = _STANDARD if layout is STANDARD else statements_for(layout)
        self._sessions = sessions or SessionRepository(connection, layout, clock)
        self._clock = clock
        self._refuse_locked = (
            backend_of(connection).refuse_locked_sessions if layout.compression_locks else None
        )
        """The backend's compression-lock guard, looked up once (a unit reuses the repository)."""

    # -- writes ----------------------------------------------------------
    def append(self, session_id: str, message: MessageIn) -> int:
        """Append one message and move the session's counters; the message's id.

        ``tool_calls`` (a list of calls, counted one each), ``reasoning_details``
        and ``codex_reasoning_items`` take any JSON-serializable value.
        """
        if not isinstance(message, MessageIn):
            raise InvalidInputError(f"message must be a MessageIn, got {type(message).__name__}")
        return self.append_fields(session_id, message.fields())

    def append_fields(self, session_id: str, fields: Mapping[str, Any]) -> int:
        """:meth:`append` for the message's fields as a mapping (:meth:`MessageIn.fields`'s keys).

        What ``SessionDB.append_message`` calls with its keyword arguments:
        the same checks, without building a record only to take it apart.
        """
        if type(session_id) is not str or not session_id.isascii():
            text_arg("session_id", session_id)
        row = message_row(session_id, fields, self._clock())
        if self._layout.compression_locks:
            self._admit((session_id,))
        if not self._sessions.bump_counters(session_id, 1, tool_call_total(fields["tool_calls"])):
            raise SessionNotFoundError(session_id)
        return self._insert(row)

    def append_checked(self, messages: Sequence[CheckedMessage]) -> list[int]:
        """Append messages checked beforehand, each stamped now, counters moved; ids in order.

        What a shared transaction does with the appends of several callers
        (:mod:`hermes_store.uow.combined`): one counter UPDATE per session and
        one multi-row INSERT for all of them, so the FTS5 indexes get one
        segment for the group rather than one per message. An unknown session
        is SessionNotFoundError for the whole call, nothing of it kept.
        """
        clock = self._clock
        rows = []
        counts: dict[str, list[int]] = {}
        for message in messages:
            message.row["timestamp"] = clock()  # stamped in the order of the calls
            rows.append(message.row)
            count = counts.get(message.session_id)
            if count is None:
                counts[message.session_id] = [1, message.tool_calls]
            else:
                count[0] += 1
                count[1] += message.tool_calls
        self._admit(tuple(counts))
        for session_id, (added, calls) in counts.items():
            if not self._sessions.bump_counters(session_id, added, calls):
                raise SessionNotFoundError(session_id)
        return insert_rows(self._c, self._layout, rows)

    def append_many(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append a turn: every message and its counters in this unit, or none; their ids.

        Each item takes the keyword arguments of :meth:`append` (``role``
        required); an item that is not a dict, lacks a role or has a field
        :meth:`append` does not take is InvalidInputError naming it.
        """
        text_arg("session_id", session_id)
        clock = self._clock
        rows, calls = turn_rows(session_id, messages, lambda _index: clock())
        if not rows:
            if not self._sessions.exists(session_id):
                raise SessionNotFoundError(session_id)
            return []
        self._admit((session_id,))
        if not self._sessions.bump_counters(session_id, len(rows), calls):
            raise SessionNotFoundError(session_id)
        return insert_rows(self._c, self._layout, rows)

    def restore(
        self, session_id: str, messages: Sequence[Mapping[str, Any]], *, keep_ids: bool = True
    ) -> list[int]:
        """Put back messages an export holds (an import), counters moved with them; their ids.

        Each item has the fields of :meth:`append` and its ``timestamp``
        (kept), and an ``id``, kept too when ``keep_ids`` and none of the ids
        is taken (else the messages get new ids, in their order).
        """
        text_arg("session_id", session_id)
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise InvalidInputError(
                f"messages must be a list of dicts, got {type(messages).__name__}"
            )
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping):
                raise InvalidInputError(
                    f"messages[{index}] must be a dict, got {type(message).__name__}"
                )
        timestamps = [
            number_arg(field_name(index, "timestamp"), message.get("timestamp"))
            for index, message in enumerate(messages)
        ]
        stripped = [
            {name: value for name, value in message.items() if name not in ("id", "timestamp")}
            for message in messages
        ]
        rows, calls = turn_rows(session_id, stripped, timestamps.__getitem__)
        ids: list[Any] = [message.get("id") for message in messages]  # kept only if all ints
        whole = all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        if keep_ids and rows and whole and not self._ids_taken(ids):
            for row, message_id in zip(rows, ids, strict=True):
                row["id"] = message_id
        if not rows:
            return []
        self._admit((session_id,))
        if not self._sessions.bump_counters(session_id, len(rows), calls):
            raise SessionNotFoundError(session_id)
        return insert_rows(self._c, self._layout, rows)

    def clear(self, session_id: str) -> None:
        """Delete a session's messages but keep the session, its counters back to zero."""
        text_arg("session_id", session_id)
        if not self._sessions.zero_counters(session_id):
            raise SessionNotFoundError(session_id)
        backend_of(self._c).refuse_broken_deletes(self._c, self._layout, (session_id,))
        self._c.execute(self._s.delete_for_session, {"p_id": session_id})

    def delete_rows_of(self, session_id: str) -> None:
        """Delete a session's message rows and nothing else: for a session being deleted.

        The counters are left as they are because the session row goes next
        (the ORM flush's rule for a deleted session, :mod:`hermes_store.uow.orm`).
        """
        backend_of(self._c).refuse_broken_deletes(self._c, self._layout, (session_id,))
        self._c.execute(self._s.delete_for_session, {"p_id": session_id})

    def _insert(self, row: dict[str, Any]) -> int:
        statement = self._s.insert_with_id if row.get("id") is not None else self._s.insert
        return statement.inserted_id(self._c, row)

    def _admit(self, session_ids: Sequence[str]) -> None:
        refuse = self._refuse_locked
        if refuse is not None:
            refuse(self._c, self._layout, session_ids)

    def _ids_taken(self, ids: Sequence[int]) -> bool:
        taken = self._c.execute(_IDS_TAKEN, {"p_ids": list(ids)}).first()
        return taken is not None

    # -- reads -----------------------------------------------------------
    def for_session(self, session_id: str) -> list[MessageRecord]:
        """Every message of the session in order (timestamp, id), JSON fields decoded."""
        text_arg("session_id", session_id)
        rows = self._s.for_session.rows(self._c, {"p_id": session_id})
        return [MessageRecord(*decode_row(row)) for row in rows]

    def for_session_as_dicts(self, session_id: str) -> list[dict[str, Any]]:
        """:meth:`for_session` as the old API's dicts, built straight from the rows.

        ``SessionDB.get_messages`` returns dicts; going through the frozen
        records first would cost a checked ``__init__`` per row and then
        ``as_dict``, a large share of a long session's read for nothing the
        caller sees. Same rows, same keys, same decoding.
        """
        text_arg("session_id", session_id)
        rows = self._s.for_session.rows(self._c, {"p_id": session_id})
        names = MESSAGE_COLUMNS
        return [dict(zip(names, decode_row(row), strict=True)) for row in rows]

    def conversation(self, session_id: str) -> list[dict[str, Any]]:
        """The session as OpenAI-format messages, for replaying it to a model."""
        text_arg("session_id", session_id)
        rows = self._s.conversation.dicts(self._c, {"p_id": session_id})
        return [conversation_entry(row) for row in rows]

    def count(self, session_id: str | None = None) -> int:
        """How many messages the session (or the whole store) holds.

        The whole store's count is every row, as the agent's own store counts
        on its files (rows its rewinds marked inactive included); a session's
        count is its live rows, the ones its reads return.
        """
        text_arg("session_id", session_id, optional=True)
        if session_id is None:
            if self._s.kept_count:
                backend = backend_of(self._c)
                kept = backend.kept_message_count(self._c) if backend.keeps_totals else None
                if kept is not None:
                    return kept
            return int(self._s.count_all.scalar(self._c, {}))
        return int(self._s.count_session.scalar(self._c, {"p_id": session_id}))


_JSON_POSITIONS = tuple(MESSAGE_COLUMNS.index(name) for name in JSON_FIELDS)
_IDS_TAKEN = text("SELECT 1 FROM messages WHERE id IN :p_ids LIMIT 1").bindparams(
    bindparam("p_ids", expanding=True)
)


def decode_row(row: tuple[Any, ...]) -> list[Any]:
    """A stored row in column order, its JSON fields decoded (text that is not JSON stays)."""
    values = list(row)
    for position in _JSON_POSITIONS:
        if values[position]:
            values[position] = decode_json(values[position])
    return values
