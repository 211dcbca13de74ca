"""Sessions: lifecycle, counters, titles, lineage and the usage reports."""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Text,
    bindparam,
    case,
    cast,
    column,
    delete,
    func,
    insert,
    table,
    text,
)
from sqlalchemy import update as sql_update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from hermes_store.backends.prepared import Prepared
from hermes_store.domain.arguments import INT64_MAX
from hermes_store.errors import InvalidInputError
from hermes_store.repositories import listing as _listing
from hermes_store.repositories.agent_guards import refuse_broken_deletes
from hermes_store.repositories.shapes import (
    session_columns,
    sessions_from,
    shadowed,
    writable_sessions,
)
from hermes_store.schema.layout import STANDARD, Layout
from hermes_store.schema.models import FLOAT, messages_table, sessions_table

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
COST_LABELS = ("cost_status", "cost_source", "pricing_version")
"""What the latest usage report says about the cost: given values replace the stored ones."""
ROUTE_LABELS = ("billing_provider", "billing_base_url", "billing_mode")
"""Where the session is billed: filled in once, then kept, like ``model`` (the old class's
``COALESCE(billing_provider, ?)``): one row cannot stand for usage on several providers."""
BILLING_LABELS = COST_LABELS + ROUTE_LABELS


def _p(name: str, type_: Any = None) -> BindParameter[Any]:
    """A bind parameter whose name cannot clash with a column in SET/VALUES."""
    return bindparam(f"p_{name}", type_=type_)


def _sourced(sql: str) -> Any:
    """A text statement with an optional ``:p_source`` filter (None means every source)."""
    return text(sql).bindparams(bindparam("p_source", type_=Text))


def _by_id() -> Any:
    return sql_update(S).where(S.c.id == _p("id"))


def _add_if_given(name: str) -> Any:
    """A cost that stays NULL until known; adding an unknown (None) one leaves it as it is."""
    # A CAST, because PostgreSQL cannot type a bare ``$n IS NULL`` parameter.
    given = cast(_p(name), FLOAT)
    return case((given.is_(None), S.c[name]), else_=func.coalesce(S.c[name], 0) + given)


_SESSION_FIELDS = ("user_id", "model", "model_config", "system_prompt", "parent_session_id")
_EXISTS = Prepared(text("SELECT id FROM sessions WHERE id = :p_id"))
# The sessions an id prefix may name, two at most (two already means ambiguous). On SQLite
# the ids starting with a prefix are the run of ids that sort right from it (BINARY
# collation compares the UTF-8 bytes, NULs included), so the primary key index yields the
# first two and the caller keeps those that do start with it; LIKE would fold ASCII case
# and stop at a NUL. PostgreSQL sorts by the database's collation, so there starts_with
# tests each id (one scan of the ids, fine at 50,000 sessions).
_PREFIX_CANDIDATES = {
    "sqlite": text("SELECT id FROM sessions WHERE id >= :p_prefix ORDER BY id LIMIT 2"),
    "postgresql": text("SELECT id FROM sessions WHERE starts_with(id, :p_prefix) LIMIT 2"),
}
# Only an open session is ended: the first end (time and reason) stays, as in the old code.
_END = _by_id().where(S.c.ended_at.is_(None)).values(ended_at=_p("at"), end_reason=_p("reason"))
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
# The usage report, as the old class wrote it: the estimated cost counts a missing figure
# as 0 (so it is a number once any usage was recorded), the actual cost only changes when
# given, cost labels follow the latest report, the model and the route the first one.
_LABELS = {
    "model": func.coalesce(S.c.model, _p("model", Text)),
    **{name: func.coalesce(_p(name, Text), S.c[name]) for name in COST_LABELS},
    **{name: func.coalesce(S.c[name], _p(name, Text)) for name in ROUTE_LABELS},
}


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
        **{name: func.coalesce(S.c[name], 0) + _p(name, Integer) for name in TOKEN_COUNTERS},
        estimated_cost_usd=func.coalesce(S.c.estimated_cost_usd, 0)
        + func.coalesce(_p("estimated_cost_usd", FLOAT), 0),
        actual_cost_usd=_add_if_given("actual_cost_usd"),
        **_LABELS,
    )
)
_SET_USAGE = _by_id().values(
    **{name: _p(name, Integer) for name in TOKEN_COUNTERS},
    estimated_cost_usd=func.coalesce(_p("estimated_cost_usd", FLOAT), 0),
    actual_cost_usd=func.coalesce(_p("actual_cost_usd", FLOAT), S.c.actual_cost_usd),
    **_LABELS,
)
_TITLE_OWNER = "SELECT id FROM sessions WHERE title = :p_title AND id != :p_id"
_TITLE_FAMILY = (
    "SELECT id, title, started_at FROM sessions "
    "WHERE title = :p_base OR title LIKE :p_pattern ESCAPE '\\'"
)
_ORPHAN_CHILDREN = (
    sql_update(S).where(S.c.parent_session_id == _p("id")).values(parent_session_id=None)
)
_DELETE = delete(S).where(S.c.id == _p("id"))
_DELETE_MESSAGES = delete(M).where(M.c.session_id == _p("id"))

# The documented queries, kept in the document's SQL so they can be checked against it
# (plus ``NULLS LAST``, SQLite's order for NULL in DESC, which PostgreSQL reverses).
_ANCESTORS = """
    WITH RECURSIVE lineage AS (
        SELECT * FROM sessions WHERE id = :p_id
        UNION
        SELECT s.* FROM sessions s
        JOIN lineage l ON s.id = l.parent_session_id
    )
    SELECT id, title, started_at, parent_session_id FROM lineage
    """
_DESCENDANTS = """
    WITH RECURSIVE descendants AS (
        SELECT * FROM sessions WHERE id = :p_id
        UNION
        SELECT s.* FROM sessions s
        JOIN descendants d ON s.parent_session_id = d.id
    )
    SELECT id, title, started_at, parent_session_id FROM descendants
    """
_RECENT = """
    SELECT {columns},
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
    FROM {sessions}
    WHERE (:p_source IS NULL OR s.source = :p_source)
    ORDER BY s.started_at DESC
    LIMIT :p_limit OFFSET :p_offset
"""
_TOKENS_BY_MODEL = """
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
_TOP_BY_TOKENS = """
    SELECT id, title, model, input_tokens + output_tokens AS total_tokens,
           estimated_cost_usd
    FROM sessions
    ORDER BY total_tokens DESC NULLS LAST
    LIMIT :p_limit
    """
_LIST = """
    SELECT {columns} FROM {sessions}
    WHERE (:p_source IS NULL OR s.source = :p_source)
    ORDER BY s.started_at DESC
    LIMIT :p_limit OFFSET :p_offset
"""
# Every session newest first like the listing, without a page.
_ALL = """
    SELECT {columns} FROM {sessions}
    WHERE (:p_source IS NULL OR s.source = :p_source)
    ORDER BY s.started_at DESC
"""
_GET = "SELECT {columns} FROM {sessions} WHERE s.id = :p_id"
_BY_TITLE = "SELECT {columns} FROM {sessions} WHERE s.title = :p_title"


@dataclass(frozen=True)
class _Reads:
    """The statements that read sessions, shaped for one file layout (see :mod:`.shapes`)."""

    get: Prepared
    by_title: Any
    recent: Any
    list: Any
    all: Prepared
    count: Any
    title_owner: Any
    title_family: Any
    ancestors: Any
    descendants: Any
    tokens_by_model: Any
    top_by_tokens: Any
    insert: Any
    insert_if_absent: dict[str, Any]
    """By dialect: the INSERT with ``ON CONFLICT (id) DO NOTHING`` (same SQL on both)."""
    system_prompts: bool
    """Prompts are kept in ``system_prompts`` by hash (the agent's v25 files)."""


def _insert_if_absent(writable: Any) -> dict[str, Any]:
    """The old code's INSERT OR IGNORE as both backends take it.

    A second create of an id changes nothing, even when two writers race:
    PostgreSQL's READ COMMITTED lets both pass an existence check, and the
    primary key then decides without an error.
    """
    return {
        "sqlite": sqlite_insert(writable).on_conflict_do_nothing(index_elements=["id"]),
        "postgresql": pg_insert(writable).on_conflict_do_nothing(index_elements=["id"]),
    }


@lru_cache(maxsize=16)
def _reads_for(layout: Layout) -> _Reads:
    shape = {"columns": session_columns(layout), "sessions": sessions_from(layout)}

    def read(sql: str) -> Any:
        return text(shadowed(sql.format(**shape), layout))

    def sourced(sql: str) -> Any:
        return read(sql).bindparams(bindparam("p_source", type_=Text))

    writable = writable_sessions(layout)
    if layout.system_prompts:  # a new clause: the cached one is shared
        writable = table(
            "sessions",
            *(column(c.name, c.type) for c in writable.c),
            column("system_prompt_hash", Text()),
        )
    return _Reads(
        get=Prepared(read(_GET)),
        by_title=read(_BY_TITLE),
        recent=sourced(_RECENT),
        list=sourced(_LIST),
        all=Prepared(sourced(_ALL)),
        count=sourced(_COUNT),
        title_owner=read(_TITLE_OWNER),
        title_family=read(_TITLE_FAMILY),
        ancestors=read(_ANCESTORS),
        descendants=read(_DESCENDANTS),
        tokens_by_model=read(_TOKENS_BY_MODEL),
        top_by_tokens=read(_TOP_BY_TOKENS),
        insert=insert(writable),
        insert_if_absent=_insert_if_absent(writable),
        system_prompts=layout.system_prompts,
    )


# The agent's v25 keeps each distinct system prompt once, keyed by its SHA-256.
_STORE_PROMPT = text(
    "INSERT OR IGNORE INTO system_prompts (hash, prompt) VALUES (:p_hash, :p_prompt)"
)
_SET_PROMPT_HASH = text(
    "UPDATE sessions SET system_prompt_hash = :p_hash, system_prompt = NULL WHERE id = :p_id"
)
_DROP_UNUSED_PROMPTS = text(
    "DELETE FROM system_prompts WHERE NOT EXISTS "
    "(SELECT 1 FROM sessions WHERE sessions.system_prompt_hash = system_prompts.hash)"
)


def prompt_hash(prompt: str) -> str:
    """The key the agent's v25 stores a system prompt under: SHA-256 of its UTF-8, in hex."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


_COUNT = "SELECT COUNT(*) FROM sessions WHERE (:p_source IS NULL OR source = :p_source)"

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


_STANDARD_READS = _reads_for(STANDARD)


class SessionRepository:
    """The ``sessions`` table as a collection of session records (plain dicts).

    Records carry the documented columns on every file; on the agent's v25
    files a session's ``system_prompt`` is read from and written to
    ``system_prompts``, as the agent's code keeps it.
    """

    def __init__(self, connection: Connection, layout: Layout = STANDARD) -> None:
        self._c = connection
        self._layout = layout
        self._r = _STANDARD_READS if layout is STANDARD else _reads_for(layout)

    # -- lifecycle -------------------------------------------------------
    def add(self, **values: Any) -> None:
        """Insert a session row; an id already taken is an IntegrityError (imports, copies)."""
        if self._r.system_prompts:
            values = {**values, **self._prompt_by_hash(values.get("system_prompt"))}
        self._c.execute(self._r.insert, values)

    def add_if_absent(self, session_id: str, source: str, started_at: float, **fields: Any) -> bool:
        """Insert a session unless its id is taken; True if this call created it.

        The first write wins, as with the old store's ``INSERT OR IGNORE``:
        an existing row keeps every value it had. ``fields`` are any of
        user_id, model, model_config, system_prompt, parent_session_id
        (the others start NULL or at their defaults).
        """
        unknown = fields.keys() - set(_SESSION_FIELDS)
        if unknown:
            raise TypeError(f"add_if_absent got unknown fields: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {name: fields.get(name) for name in _SESSION_FIELDS}
        values.update(id=session_id, source=source, started_at=started_at)
        if self._r.system_prompts:
            values.update(self._prompt_by_hash(values["system_prompt"]))
        statement = self._r.insert_if_absent[self._c.dialect.name]
        created = self._changed(statement, values)
        if not created and self._r.system_prompts:
            self._c.execute(_DROP_UNUSED_PROMPTS)  # the prompt stored for a row not written
        return created

    def get(self, session_id: str) -> dict[str, Any] | None:
        return self._r.get.first(self._c, {"p_id": session_id})

    def exists(self, session_id: str) -> bool:
        return bool(_EXISTS.rows(self._c, {"p_id": session_id}))

    def resolve_id(self, id_or_prefix: str) -> str | None:
        """The exact id, else the one session whose id starts with the prefix, else None.

        None also when the prefix is ambiguous. The prefix is literal and
        case-sensitive (``%``, ``_``, ``\\`` are plain characters), on both
        backends; the empty prefix names the only session of a store that
        has exactly one.
        """
        if self.exists(id_or_prefix):
            return id_or_prefix
        statement = _PREFIX_CANDIDATES[self._c.dialect.name]
        found = [
            session_id
            for session_id in self._c.execute(statement, {"p_prefix": id_or_prefix}).scalars()
            if session_id.startswith(id_or_prefix)
        ]
        return found[0] if len(found) == 1 else None

    def end(self, session_id: str, ended_at: float, end_reason: str | None) -> bool:
        """End an open session; an ended one keeps its first ``ended_at`` and ``end_reason``.

        A compression split must stay marked ``compression`` even when a
        stale caller ends the same id again later; ``reopen`` first to end it
        anew. Returns False only when the session is unknown.
        """
        params = {"p_id": session_id, "p_at": ended_at, "p_reason": end_reason}
        return self._changed(_END, params) or self.exists(session_id)

    def reopen(self, session_id: str) -> bool:
        return self._changed(_REOPEN, {"p_id": session_id})

    def set_system_prompt(self, session_id: str, prompt: str | None) -> bool:
        if not self._r.system_prompts:
            return self._changed(_SET_PROMPT, {"p_id": session_id, "p_prompt": prompt})
        stored = self._prompt_by_hash(prompt)
        changed = self._changed(
            _SET_PROMPT_HASH, {"p_id": session_id, "p_hash": stored["system_prompt_hash"]}
        )
        self._c.execute(_DROP_UNUSED_PROMPTS)
        return changed

    def delete(self, session_id: str) -> bool:
        """Delete a session and its messages; its children become roots, not casualties."""
        refuse_broken_deletes(self._c, self._layout, (session_id,))
        self._c.execute(_ORPHAN_CHILDREN, {"p_id": session_id})
        self._c.execute(_DELETE_MESSAGES, {"p_id": session_id})
        deleted = self._changed(_DELETE, {"p_id": session_id})
        if deleted and self._r.system_prompts:
            self._c.execute(_DROP_UNUSED_PROMPTS)
        return deleted

    def prune(self, cutoff: float, source: str | None) -> list[str]:
        """Delete ended sessions started before ``cutoff``; returns the ids removed."""
        params = {"p_cutoff": cutoff, "p_source": source}
        doomed = list(self._c.execute(_PRUNE_IDS, params).scalars())
        if doomed:
            refuse_broken_deletes(self._c, self._layout, doomed)
            self._c.execute(_PRUNE_ORPHAN, params)
            self._c.execute(_PRUNE_MESSAGES, params)
            self._c.execute(_PRUNE_SESSIONS, params)
            if self._r.system_prompts:
                self._c.execute(_DROP_UNUSED_PROMPTS)
        return doomed

    def _prompt_by_hash(self, prompt: str | None) -> dict[str, Any]:
        """Keep ``prompt`` in ``system_prompts``; the row then holds its hash, not the text."""
        if prompt is None:
            return {"system_prompt": None, "system_prompt_hash": None}
        key = prompt_hash(prompt)
        self._c.execute(_STORE_PROMPT, {"p_hash": key, "p_prompt": prompt})
        return {"system_prompt": None, "system_prompt_hash": key}

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
        BILLING_LABELS and ``model``; None means "not reported". Then the
        estimated cost counts 0 (added, or set with ``absolute``), the
        actual cost and the cost labels keep their stored values; ``model``
        and the route labels are only ever filled in where NULL. Increments
        are not negative (the caller checks). A sum that would leave 64 bits
        or stop being finite changes nothing and raises
        :class:`InvalidInputError` naming the counter; False means the session
        is unknown.
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
        return self._c.execute(self._r.title_owner, {"p_title": title, "p_id": excluding}).scalar()

    def get_by_title(self, title: str) -> dict[str, Any] | None:
        row = self._c.execute(self._r.by_title, {"p_title": title}).mappings().first()
        return dict(row) if row is not None else None

    def title_family(self, base: str) -> list[dict[str, Any]]:
        """Sessions titled ``base`` or ``base #<anything>`` (LIKE wildcards in base escaped)."""
        escaped = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._c.execute(self._r.title_family, {"p_base": base, "p_pattern": f"{escaped} #%"})
        return [dict(row) for row in rows.mappings()]

    # -- documented queries ---------------------------------------------
    def ancestors(self, session_id: str) -> list[dict[str, Any]]:
        """The session, its parent, grandparent, ... (recursive CTE of the document)."""
        return self._rows(self._r.ancestors, {"p_id": session_id})

    def descendants(self, session_id: str) -> list[dict[str, Any]]:
        """The session and every session split off it, transitively."""
        return self._rows(self._r.descendants, {"p_id": session_id})

    def recent(self, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        """Newest sessions first, with the first user message's 63-character preview."""
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return self._rows(self._r.recent, params)

    def listing(
        self,
        *,
        source: str | None = None,
        exclude_sources: Sequence[str] = (),
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        project_compression_tips: bool = True,
    ) -> list[dict[str, Any]]:
        """The old class's listing: one entry per conversation, newest start first.

        Rows carry ``preview`` (first user message, one line, 60 characters
        and ``...``) and ``last_active``; children are left out unless
        ``include_children``; a compression root is shown as its tip (see
        :mod:`~hermes_store.repositories.listing`) unless
        ``project_compression_tips`` is False or children are included.
        ``limit`` and ``offset`` count the listed entries.
        """
        rows = _listing.page(
            self._c,
            self._layout,
            source=source,
            exclude_sources=exclude_sources,
            limit=limit,
            offset=offset,
            include_children=include_children,
        )
        roots = _listing.compression_roots(rows)
        if not project_compression_tips or include_children or not roots:
            return rows
        return _listing.project(rows, _listing.tip_rows(self._c, self._layout, roots))

    def compression_tip(self, session_id: str) -> str:
        """The newest compression continuation of ``session_id``, else ``session_id`` itself.

        Followed from session to session (at most 100 steps); an unknown id
        is its own tip.
        """
        return _listing.tip_ids(self._c, self._layout, [session_id]).get(session_id, session_id)

    def list(self, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        """One page of sessions, newest first (``all`` gives every one, unpaged)."""
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return self._rows(self._r.list, params)

    def all(self, source: str | None) -> list[dict[str, Any]]:
        """Every session (of one source, or all), newest first, unpaged: for exports."""
        return self._r.all.dicts(self._c, {"p_source": source})

    def count(self, source: str | None = None) -> int:
        return int(self._c.execute(self._r.count, {"p_source": source}).scalar_one())

    def token_totals_by_model(self) -> list[dict[str, Any]]:
        return self._rows(self._r.tokens_by_model, {})

    def top_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        return self._rows(self._r.top_by_tokens, {"p_limit": limit})

    # -- plumbing --------------------------------------------------------
    def _changed(self, statement: Any, params: dict[str, Any]) -> bool:
        return self._c.execute(statement, params).rowcount > 0

    def _rows(self, statement: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(row) for row in self._c.execute(statement, params).mappings()]
