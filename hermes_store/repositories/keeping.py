"""Keeping a store usable for years: archive, pin, find by id, clean up empty sessions.

A dashboard hides a conversation without deleting it (``archived``) and keeps
one it must not lose (``pinned``): the agent's own columns (its schema 25,
our revision 0016), so both programs see the same flags on one file. A flag
is set on a whole compression chain -- the session named, the sessions it
continues and every continuation of them -- because a listing shows a chain
as one conversation (:mod:`~hermes_store.repositories.listing`): a root left
unarchived would bring back the conversation its tip was archived from.

On a file of the agent's older versions (7..11), which lack the columns,
setting a flag is a :class:`~hermes_store.errors.SchemaError` naming what
is missing; reads treat every session there as neither archived nor pinned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, Text, bindparam, text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.layout import KEEPING_COLUMNS, Layout
from hermes_store.domain.arguments import bool_arg, int_arg, number_arg, text_arg
from hermes_store.domain.keeping import EMPTY_GRACE_SECONDS, like_escaped
from hermes_store.errors import InvalidInputError, SchemaError, SessionNotFoundError
from hermes_store.repositories.sessions import SessionRepository

SECONDS_PER_DAY = 86400.0
MAX_CHAIN_STEPS = 100
"""How far a chain is followed either way (the listing's bound: deeper is a loop)."""

# The compression chain of :p_id: up through the sessions it continues, then down
# from the first of them through every continuation (a continuation is a child
# started at or after its parent ended with end_reason 'compression').
_CHAIN = """
WITH RECURSIVE up(id, depth) AS (
    SELECT CAST(:p_id AS TEXT), 0
    UNION ALL
    SELECT parent.id, up.depth + 1
    FROM up
    JOIN sessions child ON child.id = up.id
    JOIN sessions parent ON parent.id = child.parent_session_id
    WHERE parent.end_reason = 'compression'
      AND child.started_at >= parent.ended_at
      AND up.depth < :p_max_steps
),
root(id) AS (SELECT id FROM up ORDER BY depth DESC LIMIT 1),
down(id, depth) AS (
    SELECT id, 0 FROM root
    UNION ALL
    SELECT child.id, down.depth + 1
    FROM down
    JOIN sessions parent ON parent.id = down.id
    JOIN sessions child ON child.parent_session_id = parent.id
    WHERE parent.end_reason = 'compression'
      AND child.started_at >= parent.ended_at
      AND down.depth < :p_max_steps
)
"""
_CHAIN_PARAMS = (bindparam("p_id", type_=Text), bindparam("p_max_steps", type_=Integer))
_EXISTS = text("SELECT 1 FROM sessions WHERE id = :p_id")
_FLAGS = text("SELECT archived, pinned FROM sessions WHERE id = :p_id")
_RESTORE_FLAGS = text(
    "UPDATE sessions SET archived = :p_archived, pinned = :p_pinned WHERE id = :p_id"
)
_FLAGS_OF = text("SELECT id, archived, pinned FROM sessions WHERE id IN :p_ids").bindparams(
    bindparam("p_ids", expanding=True)
)


@lru_cache(maxsize=4)
def _set_flag(flag: str) -> TextClause:
    """Set ``flag`` on every session of the chain of ``:p_id`` that does not have it yet."""
    sql = (
        f"{_CHAIN} UPDATE sessions SET {flag} = :p_value "
        f"WHERE {flag} <> :p_value AND id IN (SELECT id FROM up UNION SELECT id FROM down)"
    )
    return text(sql).bindparams(*_CHAIN_PARAMS, bindparam("p_value", type_=Integer))


# Stale: untouched since the cutoff (its last message, else its start), not archived yet,
# and a chain's tip (a root that ended by compression lives on in its continuation).
_STALE = """
    SELECT s.id FROM sessions s
    WHERE s.archived = 0 {pinned}
      AND (s.end_reason IS NULL OR s.end_reason <> 'compression')
      AND s.started_at < :p_cutoff
      AND COALESCE(
          (SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id), s.started_at
      ) < :p_cutoff
    ORDER BY s.started_at, s.id
"""


def _empty_where(layout: Layout) -> str:
    """Sessions with no message row at all, old enough, not the one in use, not kept."""
    kept = " AND s.archived = 0 AND s.pinned = 0" if layout.keeps_flags else ""
    return (
        "NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id) "
        "AND s.started_at < :p_cutoff "
        "AND (CAST(:p_current AS TEXT) IS NULL OR s.id <> :p_current)" + kept
    )


@lru_cache(maxsize=16)
def _count_empty(layout: Layout) -> TextClause:
    return text(f"SELECT COUNT(*) FROM sessions s WHERE {_empty_where(layout)}").bindparams(
        bindparam("p_current", type_=Text)
    )


@lru_cache(maxsize=16)
def _empty_ids(layout: Layout) -> TextClause:
    sql = f"SELECT s.id FROM sessions s WHERE {_empty_where(layout)} ORDER BY s.started_at, s.id"
    return text(sql).bindparams(bindparam("p_current", type_=Text))


# Session ids by what a person typed: the exact id, then ids it starts, then ids holding it.
_ID_MATCHES = """
    SELECT s.id FROM sessions s
    WHERE s.id LIKE :p_pattern ESCAPE '\\' {archived}
    ORDER BY s.started_at DESC, s.id
    LIMIT :p_limit
"""


class KeepingRepository:
    """Archive and pin (whole compression chains), stale archiving, cleanup, id search.

    Works inside the unit's transaction, next to its
    :class:`~hermes_store.repositories.sessions.SessionRepository` (deleting
    goes through its ``delete``, so children are orphaned and the counters
    and kept totals move exactly as for one deleted session).
    """

    def __init__(
        self,
        connection: Connection,
        layout: Layout,
        sessions: SessionRepository,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._c = connection
        self._layout = layout
        self._sessions = sessions
        self._clock = clock

    # -- flags -----------------------------------------------------------
    def flags(self, session_id: str) -> dict[str, int]:
        """``{"archived": 0|1, "pinned": 0|1}`` of a session; empty where the file has no flags.

        An export carries them, as the agent's ``SELECT *`` export does.
        """
        if not self._layout.keeps_flags:
            return {}
        row = self._c.execute(_FLAGS, {"p_id": session_id}).first()
        return {} if row is None else {"archived": int(row[0]), "pinned": int(row[1])}

    def flags_of(self, session_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """:meth:`flags` of many sessions in one read (a page of them)."""
        if not self._layout.keeps_flags or not session_ids:
            return {}
        rows = self._c.execute(_FLAGS_OF, {"p_ids": list(session_ids)})
        return {row[0]: {"archived": int(row[1]), "pinned": int(row[2])} for row in rows}

    def _require_flags(self, what: str) -> None:
        if not self._layout.keeps_flags:
            missing = [c for c in KEEPING_COLUMNS if c not in self._layout.session_columns]
            version = self._layout.schema_version
            raise SchemaError(
                f"cannot {what}: this file's sessions table lacks {', '.join(missing)} "
                f"(schema version {version}; the agent added them in its schema 25, "
                "hermes_store in revision 0016)"
            )

    def _set(self, flag: str, session_id: str, value: bool) -> int:
        text_arg("session_id", session_id, non_empty=True)
        value = bool_arg(flag, value)
        self._require_flags(f"set {flag}")
        if self._c.execute(_EXISTS, {"p_id": session_id}).first() is None:
            raise SessionNotFoundError(session_id)
        params = {"p_id": session_id, "p_max_steps": MAX_CHAIN_STEPS, "p_value": int(value)}
        return int(self._c.execute(_set_flag(flag), params).rowcount)

    def restore_flags(self, session_id: str, *, archived: bool, pinned: bool) -> bool:
        """Put back one session's flags as an export holds them (an import); False if unknown.

        Only this session: an export lists each session of a chain with its own
        flags, so an import restores rows, not the chain rule of :meth:`set_archived`.
        """
        text_arg("session_id", session_id, non_empty=True)
        archived = bool_arg("archived", archived)
        pinned = bool_arg("pinned", pinned)
        self._require_flags("restore archived/pinned")
        params = {"p_id": session_id, "p_archived": int(archived), "p_pinned": int(pinned)}
        return bool(self._c.execute(_RESTORE_FLAGS, params).rowcount)

    def set_archived(self, session_id: str, archived: bool = True) -> int:
        """Archive (or restore) the session's whole compression chain; how many changed."""
        return self._set("archived", session_id, archived)

    def set_pinned(self, session_id: str, pinned: bool = True) -> int:
        """Pin (or unpin) the session's whole compression chain; how many changed."""
        return self._set("pinned", session_id, pinned)

    def archive_stale(self, idle_days: float, *, exclude_pinned: bool = True) -> int:
        """Archive every conversation untouched for ``idle_days``; how many sessions changed.

        Untouched: its newest message (else its start) is older than the
        cutoff. Each stale chain tip archives its chain, so a root compressed
        long ago whose continuation is active stays listed. Pinned chains are
        spared unless ``exclude_pinned=False``.
        """
        days = number_arg("idle_days", idle_days, minimum=0.0)
        exclude_pinned = bool_arg("exclude_pinned", exclude_pinned)
        self._require_flags("archive stale sessions")
        pinned = "AND s.pinned = 0" if exclude_pinned else ""
        cutoff = self._clock() - days * SECONDS_PER_DAY
        stale = [
            row[0]
            for row in self._c.execute(text(_STALE.format(pinned=pinned)), {"p_cutoff": cutoff})
        ]
        return sum(self.set_archived(session_id, True) for session_id in stale)

    # -- cleanup ---------------------------------------------------------
    def delete_sessions(self, session_ids: Sequence[str]) -> int:
        """Delete the sessions named (children orphaned, as ``delete`` does); how many went.

        All in the unit's one transaction: a failure deletes none. Ids that
        name no session are skipped; a repeated id counts once.
        """
        if isinstance(session_ids, str) or not isinstance(session_ids, Sequence):
            raise InvalidInputError(
                f"session_ids must be a list of session ids, got {type(session_ids).__name__}"
            )
        ids = [text_arg("session_ids[]", sid, non_empty=True) for sid in session_ids]
        return sum(self._sessions.delete(sid) for sid in dict.fromkeys(ids))

    def _empty_params(self, grace_seconds: float, current_session_id: str | None) -> dict[str, Any]:
        grace = number_arg("grace_seconds", grace_seconds, minimum=0.0)
        current = text_arg("current_session_id", current_session_id, optional=True)
        return {"p_cutoff": self._clock() - grace, "p_current": current}

    def count_empty(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """Sessions with no messages, started over ``grace_seconds`` ago, neither kept flag."""
        params = self._empty_params(grace_seconds, current_session_id)
        return int(self._c.execute(_count_empty(self._layout), params).scalar_one())

    def delete_empty(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """Delete what :meth:`count_empty` counts, in the unit's transaction; how many went."""
        params = self._empty_params(grace_seconds, current_session_id)
        ids = [row[0] for row in self._c.execute(_empty_ids(self._layout), params)]
        return sum(self._sessions.delete(session_id) for session_id in ids)

    # -- finding sessions by id --------------------------------------------
    def search_by_id(self, query: str, limit: int = 20, include_archived: bool = True) -> list[str]:
        """Ids of the sessions ``query`` names: exact id first, then prefixes, then substrings.

        Newest first within each kind, ``limit`` in all. ``%``, ``_`` and
        ``\\`` are literal; a blank query finds nothing.
        """
        query = text_arg("query", query)
        limit = int_arg("limit", limit, minimum=0)
        include_archived = bool_arg("include_archived", include_archived)
        needle = query.strip()
        if not needle or limit == 0:
            return []
        archived = "" if include_archived or not self._layout.keeps_flags else "AND s.archived = 0"
        statement = text(_ID_MATCHES.format(archived=archived))
        found: dict[str, None] = {}
        escaped = like_escaped(needle)
        for pattern in (escaped, f"{escaped}%", f"%{escaped}%"):
            rows = self._c.execute(statement, {"p_pattern": pattern, "p_limit": limit})
            for (session_id,) in rows:
                if needle in session_id:  # LIKE folds ASCII case on SQLite; ids are exact
                    found.setdefault(session_id)
            if len(found) >= limit:
                break
        return list(found)[:limit]
