"""A long conversation read a page at a time, or around one message (a search hit).

Both read the rows :meth:`MessageRepository.for_session_as_dicts
<hermes_store.repositories.messages.MessageRepository.for_session_as_dicts>`
reads, in the same order (timestamp, then id) and shape, so a UI can page
through what a full read would give; the neighbours of a message are its
session's, found by that order from the message itself.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.layout import MESSAGE_COLUMNS, Layout
from hermes_store.backends.shapes import live_messages, message_columns, shadowed
from hermes_store.domain.arguments import int_arg, text_arg
from hermes_store.repositories.messages import decode_row

_BEFORE = "(m.timestamp < :p_ts OR (m.timestamp = :p_ts AND m.id < :p_mid))"
_AFTER = "(m.timestamp > :p_ts OR (m.timestamp = :p_ts AND m.id > :p_mid))"


@lru_cache(maxsize=16)
def _statements(layout: Layout) -> dict[str, TextClause]:
    columns = message_columns(layout)
    live = live_messages(layout)

    def read(where: str, order: str) -> TextClause:
        sql = f"SELECT {columns} FROM messages m WHERE {where}{live} ORDER BY {order}"
        return text(shadowed(sql + " LIMIT :p_limit OFFSET :p_offset", layout))

    return {
        "page": read("m.session_id = :p_id", "m.timestamp, m.id"),
        "anchor": text(
            shadowed(
                f"SELECT m.session_id, m.timestamp FROM messages m WHERE m.id = :p_mid{live}",
                layout,
            )
        ),
        "before": read(f"m.session_id = :p_id AND {_BEFORE}", "m.timestamp DESC, m.id DESC"),
        "after": read(f"m.session_id = :p_id AND {_AFTER}", "m.timestamp, m.id"),
        "self": read("m.id = :p_mid", "m.id"),
    }


def _dicts(rows: Any) -> list[dict[str, Any]]:
    return [dict(zip(MESSAGE_COLUMNS, decode_row(tuple(row)), strict=True)) for row in rows]


def page(
    connection: Connection, layout: Layout, session_id: str, limit: int | None, offset: int
) -> list[dict[str, Any]]:
    """The session's messages from ``offset`` on, ``limit`` of them (None: all the rest)."""
    text_arg("session_id", session_id)
    limit = int_arg("limit", limit, optional=True, minimum=0)
    offset = int_arg("offset", offset, minimum=0)
    # No limit: a bound no session reaches, which both backends read the same way.
    params = {"p_id": session_id, "p_limit": 2**62 if limit is None else limit, "p_offset": offset}
    return _dicts(connection.execute(_statements(layout)["page"], params))


def around(
    connection: Connection, layout: Layout, message_id: int, before: int, after: int
) -> list[dict[str, Any]]:
    """Up to ``before`` messages before ``message_id``, the message, up to ``after`` after it.

    In conversation order, all of the message's session. An id that names
    no message (or, on the agent's files, one rewound out of the
    conversation) gives an empty list.
    """
    message_id = int_arg("message_id", message_id, minimum=0)
    before = int_arg("before", before, minimum=0)
    after = int_arg("after", after, minimum=0)
    statements = _statements(layout)
    anchor = connection.execute(statements["anchor"], {"p_mid": message_id}).first()
    if anchor is None:
        return []
    params = {"p_id": anchor[0], "p_ts": anchor[1], "p_mid": message_id, "p_offset": 0}
    earlier = _dicts(connection.execute(statements["before"], {**params, "p_limit": before}))
    itself = _dicts(connection.execute(statements["self"], {**params, "p_limit": 1}))
    later = _dicts(connection.execute(statements["after"], {**params, "p_limit": after}))
    return [*reversed(earlier), *itself, *later]
