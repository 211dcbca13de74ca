"""Sessions: lifecycle, counters, titles, lineage and the usage reports."""

from __future__ import annotations

import math
import sys
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Text,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    select,
    text,
)
from sqlalchemy import update as sql_update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from ..errors import InvalidInputError
from ..models import FLOAT, messages_table, sessions_table
from ..prepared import Prepared
from ..validation import INT64_MAX

S = sessions_table
M = messages_table

TOKEN_COUNTERS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
COST_FIELDS = ("estimated_cost_usd", "actual_cost_usd")
BILLING_LABELS = (
    "cost_status",
    "cost_source",
    "pricing_version",
    "billing_provider",
    "billing_base_url",
    "billing_mode",
)


def _p(name: str, type_: Any = None) -> BindParameter[Any]:
    """A bind parameter whose name cannot clash with a column in SET/VALUES."""
    return bindparam(f"p_{name}", type_=type_)


def _sourced(sql: str) -> Any:
    """A text statement with an optional ``:p_source`` filter (None means every source)."""
    return text(sql).bindparams(bindparam("p_source", type_=Text))


def _by_id() -> Any:
    return sql_update(S).where(S.c.id == _p("id"))


def _add_if_given(name: str) -> Any:
    """Costs are NULL until known; adding an unknown (None) cost leaves them as they are."""
    # A CAST, because PostgreSQL cannot type a bare ``$n IS NULL`` parameter.
    given = cast(_p(name), FLOAT)
    return case((given.is_(None), S.c[name]), else_=func.coalesce(S.c[name], 0) + given)


_INSERT = insert(S)
_GET = Prepared(select(S).where(S.c.id == _p("id")))
_EXISTS = Prepared(select(S.c.id).where(S.c.id == _p("id")))
_END = _by_id().values(ended_at=_p("at"), end_reason=_p("reason"))
_REOPEN = _by_id().values(ended_at=None, end_reason=None)
_SET_PROMPT = _by_id().values(system_prompt=_p("prompt"))
_SET_TITLE = _by_id().values(title=_p("title"))
_BUMP_COUNTERS = Prepared(
    _by_id().values(
        message_count=func.coalesce(S.c.message_count, 0) + _p("messages"),
        tool_call_count=func.coalesce(S.c.tool_call_count, 0) + _p("tool_calls"),
    )
)
_SET_COUNTERS = _by_id().values(message_count=_p("messages"), tool_call_count=_p("tool_calls"))


def _fits_after_adding(name: str) -> Any:
    """The sum stays a 64-bit integer: the stored value is at most ``INT64_MAX - increment``.

    The room is computed in Python, so the test itself cannot overflow; SQLite
    would otherwise turn a sum past 64 bits into a REAL, silently.
    """
    return func.coalesce(S.c[name], 0) <= _p(f"{name}_room", BigInteger)


def _finite_after_adding(name: str) -> Any:
    """The sum stays finite (SQLite would store inf; PostgreSQL refuses an overflow itself)."""
    given = cast(_p(name), FLOAT)
    return given.is_(None) | (func.coalesce(S.c[name], 0) + given <= cast(_p("float_max"), FLOAT))


_ADD_USAGE = (
    _by_id()
    .where(
        *(_fits_after_adding(name) for name in TOKEN_COUNTERS),
        *(_finite_after_adding(name) for name in COST_FIELDS),
    )
    .values(
        model=func.coalesce(S.c.model, _p("model", Text)),
        **{name: func.coalesce(S.c[name], 0) + _p(name, Integer) for name in TOKEN_COUNTERS},
        **{name: _add_if_given(name) for name in COST_FIELDS},
        **{name: func.coalesce(_p(name, Text), S.c[name]) for name in BILLING_LABELS},
    )
)
_SET_USAGE = _by_id().values(
    model=func.coalesce(S.c.model, _p("model", Text)),
    **{name: _p(name, Integer) for name in TOKEN_COUNTERS},
    **{name: func.coalesce(_p(name, FLOAT), S.c[name]) for name in COST_FIELDS},
    **{name: func.coalesce(_p(name, Text), S.c[name]) for name in BILLING_LABELS},
)
_TITLE_OWNER = select(S.c.id).where(S.c.title == _p("title"), S.c.id != _p("id"))
_BY_TITLE = select(S).where(S.c.title == _p("title"))
_TITLE_FAMILY = select(S.c.id, S.c.title, S.c.started_at).where(
    (S.c.title == _p("base")) | S.c.title.like(_p("pattern"), escape="\\")
)
_ORPHAN_CHILDREN = (
    sql_update(S).where(S.c.parent_session_id == _p("id")).values(parent_session_id=None)
)
_DELETE = delete(S).where(S.c.id == _p("id"))
_DELETE_MESSAGES = delete(M).where(M.c.session_id == _p("id"))

# The documented queries, kept in the document's SQL so they can be checked against it
# (plus ``NULLS LAST``, SQLite's order for NULL in DESC, which PostgreSQL reverses).
_ANCESTORS = text(
    """
    WITH RECURSIVE lineage AS (
        SELECT * FROM sessions WHERE id = :p_id
        UNION
        SELECT s.* FROM sessions s
        JOIN lineage l ON s.id = l.parent_session_id
    )
    SELECT id, title, started_at, parent_session_id FROM lineage
    """
)
_DESCENDANTS = text(
    """
    WITH RECURSIVE descendants AS (
        SELECT * FROM sessions WHERE id = :p_id
        UNION
        SELECT s.* FROM sessions s
        JOIN descendants d ON s.parent_session_id = d.id
    )
    SELECT id, title, started_at, parent_session_id FROM descendants
    """
)
_RECENT = _sourced(
    """
    SELECT s.*,
        COALESCE(
            (SELECT SUBSTR(m.content, 1, 63)
             FROM messages m
             WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
             ORDER BY m.timestamp, m.id LIMIT 1),
            ''
        ) AS preview,
        COALESCE(
            (SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id),
            s.started_at
        ) AS last_active
    FROM sessions s
    WHERE (:p_source IS NULL OR s.source = :p_source)
    ORDER BY s.started_at DESC
    LIMIT :p_limit OFFSET :p_offset
    """
)
_TOKENS_BY_MODEL = text(
    """
    SELECT model,
           COUNT(*) as session_count,
           SUM(input_tokens) as total_input,
           SUM(output_tokens) as total_output,
           SUM(estimated_cost_usd) as total_cost
    FROM sessions
    WHERE model IS NOT NULL
    GROUP BY model
    ORDER BY total_cost DESC NULLS LAST
    """
)
_TOP_BY_TOKENS = text(
    """
    SELECT id, title, model, input_tokens + output_tokens AS total_tokens,
           estimated_cost_usd
    FROM sessions
    ORDER BY total_tokens DESC NULLS LAST
    LIMIT :p_limit
    """
)
_LIST = _sourced(
    """
    SELECT * FROM sessions
    WHERE (:p_source IS NULL OR source = :p_source)
    ORDER BY started_at DESC
    LIMIT :p_limit OFFSET :p_offset
    """
)
# Every session newest first like the listing, without a page (LIMIT -1 is SQLite's).
_ALL = Prepared(
    _sourced(
        """
        SELECT * FROM sessions
        WHERE (:p_source IS NULL OR source = :p_source)
        ORDER BY started_at DESC
        """
    )
)
_COUNT = _sourced("SELECT COUNT(*) FROM sessions WHERE (:p_source IS NULL OR source = :p_source)")

# Prune: ended sessions started before the cutoff, optionally of one source.
_PRUNABLE = (
    "ended_at IS NOT NULL AND started_at < :p_cutoff AND (:p_source IS NULL OR source = :p_source)"
)
_PRUNE_IDS = _sourced(f"SELECT id FROM sessions WHERE {_PRUNABLE}")
_PRUNE_ORPHAN = _sourced(
    "UPDATE sessions SET parent_session_id = NULL "
    f"WHERE parent_session_id IN (SELECT id FROM sessions WHERE {_PRUNABLE})"
)
_PRUNE_MESSAGES = _sourced(
    f"DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE {_PRUNABLE})"
)
_PRUNE_SESSIONS = _sourced(f"DELETE FROM sessions WHERE {_PRUNABLE}")


def _overflow(stored: dict[str, Any], usage: dict[str, Any]) -> InvalidInputError:
    """Which counter the refused increment would have broken, in the caller's terms."""
    for name in TOKEN_COUNTERS:
        if (stored[name] or 0) > INT64_MAX - usage[name]:
            return InvalidInputError(
                f"{name}: {stored[name]} + {usage[name]} is past {INT64_MAX}, the largest "
                "integer the store holds; nothing was written"
            )
    for name in COST_FIELDS:
        if usage[name] is not None and not math.isfinite((stored[name] or 0.0) + usage[name]):
            return InvalidInputError(
                f"{name}: {stored[name]} + {usage[name]} is not a finite number; "
                "nothing was written"
            )
    return InvalidInputError("a counter would overflow; nothing was written")


class SessionRepository:
    """The ``sessions`` table as a collection of session records (plain dicts)."""

    def __init__(self, connection: Connection) -> None:
        self._c = connection

    # -- lifecycle -------------------------------------------------------
    def add(self, **values: Any) -> None:
        self._c.execute(_INSERT, values)

    def get(self, session_id: str) -> dict[str, Any] | None:
        return _GET.first(self._c, {"p_id": session_id})

    def exists(self, session_id: str) -> bool:
        return bool(_EXISTS.rows(self._c, {"p_id": session_id}))

    def end(self, session_id: str, ended_at: float, end_reason: str | None) -> bool:
        return self._changed(_END, {"p_id": session_id, "p_at": ended_at, "p_reason": end_reason})

    def reopen(self, session_id: str) -> bool:
        return self._changed(_REOPEN, {"p_id": session_id})

    def set_system_prompt(self, session_id: str, prompt: str | None) -> bool:
        return self._changed(_SET_PROMPT, {"p_id": session_id, "p_prompt": prompt})

    def delete(self, session_id: str) -> bool:
        """Delete a session and its messages; its children become roots, not casualties."""
        self._c.execute(_ORPHAN_CHILDREN, {"p_id": session_id})
        self._c.execute(_DELETE_MESSAGES, {"p_id": session_id})
        return self._changed(_DELETE, {"p_id": session_id})

    def prune(self, cutoff: float, source: str | None) -> list[str]:
        """Delete ended sessions started before ``cutoff``; returns the ids removed."""
        params = {"p_cutoff": cutoff, "p_source": source}
        doomed = list(self._c.execute(_PRUNE_IDS, params).scalars())
        if doomed:
            self._c.execute(_PRUNE_ORPHAN, params)
            self._c.execute(_PRUNE_MESSAGES, params)
            self._c.execute(_PRUNE_SESSIONS, params)
        return doomed

    # -- counters --------------------------------------------------------
    def bump_counters(self, session_id: str, messages: int, tool_calls: int) -> bool:
        """Add to the counters in one atomic UPDATE; False if the session is unknown."""
        params = {"p_id": session_id, "p_messages": messages, "p_tool_calls": tool_calls}
        return _BUMP_COUNTERS.rowcount(self._c, params) > 0

    def set_counters(self, session_id: str, messages: int, tool_calls: int) -> bool:
        params = {"p_id": session_id, "p_messages": messages, "p_tool_calls": tool_calls}
        return self._changed(_SET_COUNTERS, params)

    def record_usage(self, session_id: str, usage: dict[str, Any], *, absolute: bool) -> bool:
        """Add ``usage`` to the counters (or set them, ``absolute=True``) in one UPDATE.

        ``usage`` carries every name of TOKEN_COUNTERS, COST_FIELDS,
        BILLING_LABELS and ``model``; None means "not reported" for costs and
        labels, which keeps the stored value. Increments are not negative (the
        caller checks). A sum that would leave 64 bits or stop being finite
        changes nothing and raises :class:`InvalidInputError` naming the
        counter; False means the session is unknown.
        """
        params = {f"p_{name}": value for name, value in usage.items()}
        params["p_id"] = session_id
        if absolute:
            return self._changed(_SET_USAGE, params)
        for name in TOKEN_COUNTERS:
            params[f"p_{name}_room"] = INT64_MAX - usage[name]
        params["p_float_max"] = sys.float_info.max
        if self._changed(_ADD_USAGE, params):
            return True
        stored = self.get(session_id)
        if stored is None:
            return False
        raise _overflow(stored, usage)

    # -- titles ----------------------------------------------------------
    def set_title(self, session_id: str, title: str | None) -> bool:
        return self._changed(_SET_TITLE, {"p_id": session_id, "p_title": title})

    def title_owner(self, title: str, excluding: str) -> str | None:
        """The id of another session that already has ``title``, if any."""
        return self._c.execute(_TITLE_OWNER, {"p_title": title, "p_id": excluding}).scalar()

    def get_by_title(self, title: str) -> dict[str, Any] | None:
        row = self._c.execute(_BY_TITLE, {"p_title": title}).mappings().first()
        return dict(row) if row is not None else None

    def title_family(self, base: str) -> list[dict[str, Any]]:
        """Sessions titled ``base`` or ``base #<anything>`` (LIKE wildcards in base escaped)."""
        escaped = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._c.execute(_TITLE_FAMILY, {"p_base": base, "p_pattern": f"{escaped} #%"})
        return [dict(row) for row in rows.mappings()]

    # -- documented queries ---------------------------------------------
    def ancestors(self, session_id: str) -> list[dict[str, Any]]:
        """The session, its parent, grandparent, ... (recursive CTE of the document)."""
        return self._rows(_ANCESTORS, {"p_id": session_id})

    def descendants(self, session_id: str) -> list[dict[str, Any]]:
        """The session and every session split off it, transitively."""
        return self._rows(_DESCENDANTS, {"p_id": session_id})

    def recent(self, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        """Newest sessions first, with the first user message's 63-character preview."""
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return self._rows(_RECENT, params)

    def list(self, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        """One page of sessions, newest first (``all`` gives every one, unpaged)."""
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return self._rows(_LIST, params)

    def all(self, source: str | None) -> list[dict[str, Any]]:
        """Every session (of one source, or all), newest first, unpaged: for exports."""
        return _ALL.dicts(self._c, {"p_source": source})

    def count(self, source: str | None = None) -> int:
        return int(self._c.execute(_COUNT, {"p_source": source}).scalar_one())

    def token_totals_by_model(self) -> list[dict[str, Any]]:
        return self._rows(_TOKENS_BY_MODEL, {})

    def top_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        return self._rows(_TOP_BY_TOKENS, {"p_limit": limit})

    # -- plumbing --------------------------------------------------------
    def _changed(self, statement: Any, params: dict[str, Any]) -> bool:
        return self._c.execute(statement, params).rowcount > 0

    def _rows(self, statement: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(row) for row in self._c.execute(statement, params).mappings()]
