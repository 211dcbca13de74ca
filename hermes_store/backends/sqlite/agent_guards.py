"""Writes the agent's own schema versions need guarded, before anything is written.

Two things the agent's code does on its files that a writer sharing them has
to respect:

* **compression locks** (v25): while an agent process replaces a session's
  transcript with a compacted one it holds a row in ``compression_locks``;
  a message appended meanwhile would vanish in the rewrite, so appends to a
  locked session are refused (:class:`~hermes_store.errors.SessionBusyError`);
* **v10's inline indexes** take no external-content ``'delete'``: their
  delete triggers fail every DELETE of a message. The delete is refused with
  an error that names the file, the trigger's table and the remedy, instead
  of SQLite's bare "SQL logic error" from inside the trigger.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection

from hermes_store.backends.layout import Layout
from hermes_store.backends.prepared import Prepared
from hermes_store.errors import SchemaError, SessionBusyError

_ANY_MESSAGE = text("SELECT 1 FROM messages WHERE session_id IN :p_ids LIMIT 1").bindparams(
    bindparam("p_ids", expanding=True)
)
# One session at a time: an append names one or a few sessions, and a statement
# without an expanding IN is compiled once and then run straight on the driver.
_HELD_LOCK = Prepared(
    text(
        "SELECT session_id, holder, expires_at FROM compression_locks "
        "WHERE session_id = :p_id AND expires_at > :p_now"
    )
)


def refuse_locked_sessions(
    connection: Connection, layout: Layout, session_ids: Iterable[str]
) -> None:
    """Raise :class:`SessionBusyError` if another process is compressing one of them.

    The lock's expiry is wall-clock time shared between processes, so it is
    compared with ``time.time()``, not with a store's injectable clock.
    """
    if not layout.compression_locks:
        return
    now = time.time()
    # An append names one session: nothing to sort or deduplicate then.
    one = type(session_ids) is tuple and len(session_ids) == 1
    for session_id in session_ids if one else sorted(set(session_ids)):
        held = _HELD_LOCK.rows(connection, {"p_id": session_id, "p_now": now})
        if held:
            raise SessionBusyError(str(held[0][0]), str(held[0][1]), float(held[0][2]))


def refuse_broken_deletes(
    connection: Connection, layout: Layout, session_ids: Iterable[str]
) -> None:
    """Raise :class:`SchemaError` before deleting messages that the file's triggers fail on.

    A session without messages deletes fine (no trigger fires), so only
    sessions that have messages are refused.
    """
    broken = layout.message_deletes_fail
    if broken is None:
        return
    ids = sorted(set(session_ids))
    if not ids or connection.execute(_ANY_MESSAGE, {"p_ids": ids}).first() is None:
        return
    database = connection.engine.url.database
    raise SchemaError(
        f"cannot delete messages in {database}: its trigger on messages sends the inline "
        f"FTS table {broken.name} the external-content 'delete' command, which SQLite "
        "refuses (a defect of the Hermes agent's schema version 10); open the file once "
        "with the agent at version 11 or later, which rebuilds these indexes, then retry. "
        "Nothing was deleted"
    )
