"""Sessions: lifecycle, counters, titles, lineage and the usage reports."""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
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
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import BindParameter

from hermes_store.backends import backend_of
from hermes_store.backends.base import Backend
from hermes_store.backends.prepared import Prepared
from hermes_store.domain.arguments import (
    INT64_MAX,
    bool_arg,
    int_arg,
    json_arg,
    names_arg,
    number_arg,
    text_arg,
)
from hermes_store.domain.messages import stored_tool_call_total
from hermes_store.domain.records import LineageEntry, ModelUsage, SessionRecord, TopSession
from hermes_store.domain.titles import clean_title, lineage_base, lineage_number, next_in_lineage
from hermes_store.errors import InvalidInputError, SessionNotFoundError, TitleConflictError
from hermes_store.repositories import listing as _listing
from hermes_store.repositories.agent_guards import refuse_broken_deletes
from hermes_store.repositories.shapes import (
    session_columns,
    sessions_from,
    shadowed,
    writable_sessions,
)
from hermes_store.schema.layout import SESSION_COLUMNS, STANDARD, Layout
from hermes_store.schema.tables import FLOAT, messages_table, sessions_table

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
_NO_ROW = text("SELECT * FROM sessions WHERE 0 = 1")
"""No row, only the columns ``SELECT *`` gives, in the table's own order, on either backend."""
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
# The sessions an id prefix may name, two at most (two already means ambiguous), and the
# sessions of a lineage (titled ``base`` or ``base #<anything>``): each backend's own SQL,
# since whether a prefix is a range of an index depends on the collation.
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
    ORDER BY total_cost DESC NULLS LAST, model
    """
_TOP_BY_TOKENS = """
    SELECT id, title, model, CAST(input_tokens AS BIGINT) + output_tokens AS total_tokens,
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
    title_family: dict[str, Prepared]
    """By backend name: its lineage statement in this layout, built on first use."""
    ancestors: Any
    descendants: Any
    tokens_by_model: Any
    top_by_tokens: Any
    insert: Any
    writable: Any
    """The table a session is written to, in this layout."""
    insert_if_absent: dict[str, Any]
    """By backend name: the INSERT with ``ON CONFLICT (id) DO NOTHING``, built on first use."""
    system_prompts: bool
    """Prompts are kept in ``system_prompts`` by hash (the agent's v25 files)."""


def _in_layout(sql: str, layout: Layout) -> Any:
    """``sql`` with the layout's session columns and source, shadowed where it hides rows."""
    shape = {"columns": session_columns(layout), "sessions": sessions_from(layout)}
    return text(shadowed(sql.format(**shape), layout))


@lru_cache(maxsize=16)
def _reads_for(layout: Layout) -> _Reads:
    def read(sql: str) -> Any:
        return _in_layout(sql, layout)

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
        title_family={},
        ancestors=read(_ANCESTORS),
        descendants=read(_DESCENDANTS),
        tokens_by_model=read(_TOKENS_BY_MODEL),
        top_by_tokens=read(_TOP_BY_TOKENS),
        insert=insert(writable),
        writable=writable,
        insert_if_absent={},
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
# Prune in batches (see hermes_store.uow.pruning): the plan lists the prunable sessions
# oldest first with their stored message counts; a batch deletes those of
# its ids that are still prunable under the same cutoff -- one reopened meanwhile stays.
_PRUNE_PLAN = _sourced(
    f"SELECT id, COALESCE(message_count, 0) FROM sessions WHERE {_PRUNABLE} ORDER BY started_at, id"
)
_BATCH_DOOMED = f"SELECT id FROM sessions WHERE id IN :p_ids AND {_PRUNABLE}"


# What deleting a session's messages costs scales with their text (each FTS index
# tokenizes it again to delete it), which varies 15-fold between sessions.
def _batch(sql: str) -> Any:
    return _sourced(sql).bindparams(bindparam("p_ids", expanding=True))


_PRUNE_BATCH = (
    _batch(
        f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN ({_BATCH_DOOMED})"
    ),
    _batch(f"DELETE FROM messages WHERE session_id IN ({_BATCH_DOOMED})"),
)
_PRUNE_BATCH_SESSIONS = _batch(f"DELETE FROM sessions WHERE id IN :p_ids AND {_PRUNABLE}")
# A session too big for one batch is emptied a slice at a time first (oldest messages
# first), its counters following each slice, while it is still prunable.
_TRIM_SLICE = _sourced(
    "SELECT m.id, m.tool_calls FROM messages m WHERE m.session_id = :p_id "
    f"AND EXISTS (SELECT 1 FROM sessions WHERE id = :p_id AND {_PRUNABLE}) "
    "ORDER BY m.id LIMIT :p_limit"
)
_DELETE_MESSAGE_IDS = text("DELETE FROM messages WHERE id IN :p_ids").bindparams(
    bindparam("p_ids", expanding=True)
)
FTS_MERGE_PAGES = 150
"""Pages of FTS5 segment merging each prune batch does per index, while levels are due.

FTS5 merges as it writes: each time 64 more leaf pages have been written to an
index, the transaction that crossed the mark merges 64 pages per level of the
index (hundreds of pages) -- and the prune batch that crossed the mark held
the lock many times its target. A bounded merge step in every batch keeps the
levels merged as the prune goes, so the big steps find little left to do and
the longest holds are shorter (design notes, "Pruning"; the same FTS5 command
any program may run; the file's FTS settings are untouched).
"""
_GUARD_CHUNK = 500
"""Ids per statement of the broken-delete check (SQLite's limit on bound variables)."""


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


def insert_session_row(connection: Connection, layout: Layout, values: Mapping[str, Any]) -> None:
    """Insert a session row as given (an id taken is an IntegrityError); no rule applied.

    For the tools that move whole stores as they are stored -- an import
    writes the counters its file holds beside the messages it holds -- not
    for services, which create sessions through :class:`SessionRepository`.
    """
    reads = _STANDARD_READS if layout is STANDARD else _reads_for(layout)
    row = dict(values)
    if reads.system_prompts:
        prompt = row.get("system_prompt")
        row["system_prompt"] = None
        row["system_prompt_hash"] = None
        if prompt is not None:
            row["system_prompt_hash"] = prompt_hash(prompt)
            connection.execute(
                _STORE_PROMPT, {"p_hash": row["system_prompt_hash"], "p_prompt": prompt}
            )
    connection.execute(reads.insert, row)


_LINK_PARENT = (
    sql_update(S)
    .where(S.c.id == _p("id"), S.c.parent_session_id.is_(None))
    .values(parent_session_id=_p("parent"))
)


SECONDS_PER_DAY = 86400.0


class SessionRepository:
    """The ``sessions`` table as a collection of sessions, with the rules of each change.

    Every write method checks its arguments (the store's
    :class:`~hermes_store.errors.InvalidInputError`, naming the argument,
    before anything is written), keeps the invariants the old class kept
    (the first create and the first end win, titles unique and cleaned,
    counters only through messages and usage reports, children of a deleted
    session become roots) and raises
    :class:`~hermes_store.errors.SessionNotFoundError` for an unknown id where
    the old class's callers expect one. Reads give typed records
    (:mod:`hermes_store.domain.records`).

    Records carry the documented columns on every file; on the agent's v25
    files a session's ``system_prompt`` is read from and written to
    ``system_prompts``, as the agent's code keeps it.
    """

    def __init__(
        self,
        connection: Connection,
        layout: Layout = STANDARD,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._c = connection
        self._layout = layout
        self._clock = clock
        self._r = _STANDARD_READS if layout is STANDARD else _reads_for(layout)
        self._backend = backend_of(connection)

    # -- lifecycle -------------------------------------------------------
    def create(
        self,
        session_id: str,
        source: str,
        *,
        model: str | None = None,
        model_config: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
        user_id: str | None = None,
        parent_session_id: str | None = None,
    ) -> bool:
        """Create a session unless the id exists; True if this call created it.

        The first write wins, as in the old store (``INSERT OR IGNORE``): a
        second call with the same id changes nothing, so an agent that
        retries its start-up, or two processes that start the same session,
        never fail on it. A ``parent_session_id`` naming no session is
        InvalidInputError -- unless the id exists already, which is a no-op
        before the parent is looked at.
        """
        fields = {
            "model": text_arg("model", model, optional=True),
            "model_config": json_arg("model_config", model_config),
            "system_prompt": text_arg("system_prompt", system_prompt, optional=True),
            "user_id": text_arg("user_id", user_id, optional=True),
            "parent_session_id": text_arg("parent_session_id", parent_session_id, optional=True),
        }
        return self._add_if_absent(session_id, source, fields)

    def ensure(self, session_id: str, source: str = "unknown", model: str | None = None) -> bool:
        """Make sure a session row exists: a minimal one if absent; True if it was made.

        The agent calls this before flushing messages, to recover from a
        ``create`` that failed (a lock at start-up); an existing session
        keeps its source, model and everything else.
        """
        return self._add_if_absent(
            session_id, source, {"model": text_arg("model", model, optional=True)}
        )

    def _add_if_absent(self, session_id: str, source: str, fields: dict[str, Any]) -> bool:
        """Insert ``session_id`` unless present; the parent must exist only for a new row."""
        text_arg("session_id", session_id, non_empty=True)
        text_arg("source", source, non_empty=True)
        if self.exists(session_id):
            return False
        parent = fields.get("parent_session_id")
        if parent is not None and not self.exists(parent):
            raise InvalidInputError(f"parent_session_id {parent!r} names no session")
        return self._insert_if_absent(session_id, source, self._clock(), **fields)

    def _insert_if_absent(
        self, session_id: str, source: str, started_at: float, **fields: Any
    ) -> bool:
        """Insert a session unless its id is taken (a racing creator wins); True if made."""
        values: dict[str, Any] = {name: fields.get(name) for name in _SESSION_FIELDS}
        values.update(id=session_id, source=source, started_at=started_at)
        if self._r.system_prompts:
            values.update(self._prompt_by_hash(values["system_prompt"]))
        statement = self._insert_if_absent_statement()
        created = self._changed(statement, values)
        if not created and self._r.system_prompts:
            self._c.execute(_DROP_UNUSED_PROMPTS)  # the prompt stored for a row not written
        return created

    def restore(self, values: Mapping[str, Any]) -> bool:
        """Put back a session as an export holds it (an import); False if its id exists.

        Every documented column but the message counters is taken from
        ``values`` (times, tokens, costs, title, lineage); ``message_count``
        and ``tool_call_count`` start at 0 and grow with the messages
        restored through :meth:`MessageRepository.restore`, so they stay
        exact whatever the export said. The parent must exist and the title
        be free (InvalidInputError otherwise): an import that cannot keep
        them passes them as None and links them later.
        """
        row = _restored_row(values)
        if self.exists(row["id"]):
            return False
        parent = row["parent_session_id"]
        if parent is not None and not self.exists(parent):
            raise InvalidInputError(f"parent_session_id {parent!r} names no session")
        if row["title"] is not None:
            self._refuse_taken_title(row["title"], row["id"])
        if self._r.system_prompts:
            row.update(self._prompt_by_hash(row["system_prompt"]))
        self._c.execute(self._r.insert, row)
        return True

    def link_parent(self, session_id: str, parent_session_id: str) -> bool:
        """Give a root session its parent (an import whose parent came later); False if unknown.

        A session that has a parent keeps it.
        """
        text_arg("session_id", session_id)
        text_arg("parent_session_id", parent_session_id)
        if not self.exists(parent_session_id):
            raise InvalidInputError(f"parent_session_id {parent_session_id!r} names no session")
        return self._changed(_LINK_PARENT, {"p_id": session_id, "p_parent": parent_session_id})

    def get(self, session_id: str) -> SessionRecord | None:
        """The session's row (every documented column), or None for an unknown id."""
        text_arg("session_id", session_id)
        row = self._r.get.first(self._c, {"p_id": session_id})
        return None if row is None else SessionRecord(**row)

    def exists(self, session_id: str) -> bool:
        """Whether a session has this exact id (no argument check: the callers made it)."""
        return bool(_EXISTS.rows(self._c, {"p_id": session_id}))

    def resolve_id(self, id_or_prefix: str) -> str | None:
        """The exact id, else the one session whose id starts with the prefix, else None.

        None also when the prefix is ambiguous. The prefix is literal and
        case-sensitive (``%``, ``_``, ``\\`` are plain characters), on both
        backends; the empty prefix names the only session of a store that
        has exactly one.
        """
        text_arg("session_id_or_prefix", id_or_prefix)
        if self.exists(id_or_prefix):
            return id_or_prefix
        statement = self._backend.prefix_candidates()
        found = [
            session_id
            for session_id in self._c.execute(statement, {"p_prefix": id_or_prefix}).scalars()
            if session_id.startswith(id_or_prefix)
        ]
        return found[0] if len(found) == 1 else None

    def end(self, session_id: str, end_reason: str | None) -> None:
        """End an open session; an ended one keeps its first ``ended_at`` and ``end_reason``.

        A compression split must stay marked ``compression`` even when a
        stale caller ends the same id again later; :meth:`reopen` first to
        end it anew. An unknown id is SessionNotFoundError.
        """
        text_arg("session_id", session_id)
        end_reason = text_arg("end_reason", end_reason, optional=True)
        params = {"p_id": session_id, "p_at": self._clock(), "p_reason": end_reason}
        if not (self._changed(_END, params) or self.exists(session_id)):
            raise SessionNotFoundError(session_id)

    def reopen(self, session_id: str) -> None:
        """Clear ``ended_at``/``end_reason`` so a resumed session counts as active."""
        text_arg("session_id", session_id)
        self._require(self._changed(_REOPEN, {"p_id": session_id}), session_id)

    def set_system_prompt(self, session_id: str, prompt: str | None) -> None:
        """Replace the session's system prompt snapshot (None clears it)."""
        text_arg("session_id", session_id)
        prompt = text_arg("system_prompt", prompt, optional=True)
        if not self._r.system_prompts:
            changed = self._changed(_SET_PROMPT, {"p_id": session_id, "p_prompt": prompt})
        else:
            stored = self._prompt_by_hash(prompt)
            changed = self._changed(
                _SET_PROMPT_HASH, {"p_id": session_id, "p_hash": stored["system_prompt_hash"]}
            )
            self._c.execute(_DROP_UNUSED_PROMPTS)
        self._require(changed, session_id)

    def delete(self, session_id: str) -> bool:
        """Delete a session and its messages; True if it existed. Children become roots."""
        text_arg("session_id", session_id)
        refuse_broken_deletes(self._c, self._layout, (session_id,))
        self._c.execute(_ORPHAN_CHILDREN, {"p_id": session_id})
        self._c.execute(_DELETE_MESSAGES, {"p_id": session_id})
        deleted = self._changed(_DELETE, {"p_id": session_id})
        if deleted and self._r.system_prompts:
            self._c.execute(_DROP_UNUSED_PROMPTS)
        return deleted

    def _prune_params(self, older_than_days: float, source: str | None) -> dict[str, Any]:
        days = number_arg("older_than_days", older_than_days, minimum=0.0)
        text_arg("source", source, optional=True)
        return {"p_cutoff": self._clock() - days * SECONDS_PER_DAY, "p_source": source}

    def prune(self, older_than_days: float = 90, source: str | None = None) -> int:
        """Delete ended sessions started more than N days ago; how many went.

        Their children are orphaned (they become roots), not deleted. All of
        it in the unit's one transaction: at 40,000 sessions that holds the
        write lock for minutes; ``SessionDB.prune_sessions`` prunes in short
        batches instead (:mod:`hermes_store.uow.pruning`).
        """
        params, planned = self.prune_plan(older_than_days, source)
        doomed = [session_id for session_id, _ in planned]
        for start in range(0, len(doomed), _GUARD_CHUNK):
            self.prune_batch(doomed[start : start + _GUARD_CHUNK], params)
        return len(doomed)

    def prune_plan(
        self, older_than_days: float = 90, source: str | None = None
    ) -> tuple[dict[str, Any], list[tuple[str, int]]]:
        """What a prune in batches deletes: its fixed cutoff and the sessions, oldest first.

        The cutoff (``params``) is computed once, here, so every batch and the
        final sweep judge by the same instant as a one-transaction prune would.
        Each session comes with its stored message count, which sizes the
        batches. A file whose triggers would make deleting messages fail
        (agent v10) is refused here, before any batch deletes anything.
        """
        params = self._prune_params(older_than_days, source)
        return params, self.prune_candidates(params)

    def prune_candidates(self, params: dict[str, Any]) -> list[tuple[str, int]]:
        """The sessions prunable under ``params`` (from :meth:`prune_plan`) now, oldest first."""
        found = [(row[0], int(row[1])) for row in self._c.execute(_PRUNE_PLAN, params)]
        for start in range(0, len(found), _GUARD_CHUNK):
            chunk = [session_id for session_id, _ in found[start : start + _GUARD_CHUNK]]
            refuse_broken_deletes(self._c, self._layout, chunk)
        return found

    def text_sizes(self, session_ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """Per session: its messages, the characters of their text, and the bytes beyond one each.

        The last is how much of the text is not ASCII (two more bytes for a
        CJK character in UTF-8, one for an accented letter). Sessions with no
        message are left out. A prune in batches sizes its batches by this
        (see :mod:`hermes_store.uow.pruning`).
        """
        if not session_ids:
            return {}
        statement = self._backend.text_sizes()
        rows = self._c.execute(statement, {"p_ids": list(session_ids)})
        return {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in rows}

    def prune_batch(
        self, session_ids: Sequence[str], params: dict[str, Any], *, tidy: bool = True
    ) -> int:
        """Delete those of ``session_ids`` still prunable under ``params``; how many went.

        Their children orphaned, their messages deleted, then the sessions
        (:meth:`prune` is these batches in one transaction). ``tidy=False``
        leaves the system prompts no session uses any more to a later
        :meth:`drop_unused_prompts` (one scan for many calls).
        """
        if not session_ids:
            return 0
        batch = {**params, "p_ids": list(session_ids)}
        for statement in _PRUNE_BATCH:
            self._c.execute(statement, batch)
        deleted = self._c.execute(_PRUNE_BATCH_SESSIONS, batch).rowcount
        if deleted and tidy:
            self.drop_unused_prompts()
        return int(deleted)

    def drop_unused_prompts(self) -> None:
        """Delete the stored system prompts no session refers to (the agent's v25 table)."""
        if self._r.system_prompts:
            self._c.execute(_DROP_UNUSED_PROMPTS)

    def prune_slice(self, session_id: str, params: dict[str, Any], limit: int) -> int:
        """Delete up to ``limit`` of a still-prunable session's oldest messages; how many went.

        For a session bigger than a batch (see :mod:`hermes_store.uow.pruning`):
        its message and tool-call counters drop with the rows, so they agree
        with what is left after every commit; the session itself goes with its
        last messages in :meth:`prune_batch`.
        """
        sliced = self._c.execute(_TRIM_SLICE, {**params, "p_id": session_id, "p_limit": limit})
        rows = sliced.all()
        if not rows:
            return 0
        calls = sum(stored_tool_call_total(raw) for _, raw in rows if raw)
        self._c.execute(_DELETE_MESSAGE_IDS, {"p_ids": [row[0] for row in rows]})
        self._bump_counters(session_id, -len(rows), -calls)
        return len(rows)

    def merge_fts_step(self) -> None:
        """A bounded FTS5 merge step on each index this process can load (SQLite only).

        Each batch of a prune in batches takes one (see :data:`FTS_MERGE_PAGES`):
        it keeps the batches short. A prune in one transaction has no batches
        to keep short, and takes none.
        """
        for statement in self._backend.merge_fts_sql(self._layout, FTS_MERGE_PAGES):
            self._c.exec_driver_sql(statement)

    def _prompt_by_hash(self, prompt: str | None) -> dict[str, Any]:
        """Keep ``prompt`` in ``system_prompts``; the row then holds its hash, not the text."""
        if prompt is None:
            return {"system_prompt": None, "system_prompt_hash": None}
        key = prompt_hash(prompt)
        self._c.execute(_STORE_PROMPT, {"p_hash": key, "p_prompt": prompt})
        return {"system_prompt": None, "system_prompt_hash": key}

    # -- counters --------------------------------------------------------
    def _bump_counters(self, session_id: str, messages: int, tool_calls: int) -> bool:
        """Add to the counters in one atomic UPDATE; False if the session is unknown.

        Only the messages repository and a unit's ORM flush (:mod:`hermes_store.uow.orm`)
        call this, for the messages they write: the counters always follow the rows.
        """
        params = {"p_id": session_id, "p_messages": messages, "p_tool_calls": tool_calls}
        return _BUMP_COUNTERS.rowcount(self._c, params) > 0

    def _zero_counters(self, session_id: str) -> bool:
        params = {"p_id": session_id, "p_messages": 0, "p_tool_calls": 0}
        return self._changed(_SET_COUNTERS, params)

    def record_usage(
        self,
        session_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        model: str | None = None,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        estimated_cost_usd: float | None = None,
        actual_cost_usd: float | None = None,
        cost_status: str | None = None,
        cost_source: str | None = None,
        pricing_version: str | None = None,
        billing_provider: str | None = None,
        billing_base_url: str | None = None,
        billing_mode: str | None = None,
        absolute: bool = False,
    ) -> None:
        """Add a usage report to the token and cost counters, or set them (``absolute``).

        As the old class: ``model`` and the route (``billing_provider``,
        ``billing_base_url``, ``billing_mode``) fill in a session that had
        none and are kept after that; the cost labels (status, source,
        pricing version) replace the stored ones when given. An
        ``estimated_cost_usd`` of None counts as 0 (so a session with
        recorded usage always has a number there); an ``actual_cost_usd`` of
        None keeps the stored value. Counts and costs are not negative; a sum
        that would leave 64 bits or stop being finite changes nothing and is
        InvalidInputError naming the counter. An unknown session is
        SessionNotFoundError.
        """
        text_arg("session_id", session_id)
        arguments = locals()
        usage: dict[str, Any] = {"model": text_arg("model", model, optional=True)}
        # Counters only grow: a negative increment would make them disagree with the usage.
        for name in TOKEN_COUNTERS:
            usage[name] = int_arg(name, arguments[name], minimum=0)
        for name in COST_FIELDS:
            usage[name] = number_arg(name, arguments[name], optional=True, minimum=0.0)
        for name in BILLING_LABELS:
            usage[name] = text_arg(name, arguments[name], optional=True)
        if not isinstance(absolute, bool):
            raise InvalidInputError(f"absolute must be a bool, got {type(absolute).__name__}")
        params = {f"p_{name}": value for name, value in usage.items()}
        params["p_id"] = session_id
        if absolute:
            self._require(self._changed(_SET_USAGE, params), session_id)
            return
        for name in TOKEN_COUNTERS:
            params[f"p_{name}_room"] = INT64_MAX - usage[name]
        params["p_float_max"] = sys.float_info.max
        if self._changed(_ADD_USAGE, params):
            return
        stored = self._r.get.first(self._c, {"p_id": session_id})
        if stored is None:
            raise SessionNotFoundError(session_id)
        raise _overflow(stored, usage)

    # -- titles ----------------------------------------------------------
    def set_title(self, session_id: str, title: str | None) -> bool:
        """Set (or, with an empty title, clear) a title; False if the session is unknown.

        The title is cleaned (control characters out, whitespace folded, at
        most 100 characters) and must be unique among sessions: one another
        session holds is TitleConflictError, one the rules refuse
        InvalidInputError -- both ValueError, raised before the session is
        looked up, as in the old class.
        """
        text_arg("session_id", session_id)
        cleaned = clean_title(title)
        if cleaned is not None:
            self._refuse_taken_title(cleaned, session_id)
        try:
            return self._changed(_SET_TITLE, {"p_id": session_id, "p_title": cleaned})
        except IntegrityError as error:  # lost a race with another writer
            raise TitleConflictError(f"title {cleaned!r} is already in use") from error

    def _refuse_taken_title(self, title: str, session_id: str) -> None:
        owner = self.title_owner(title, excluding=session_id)
        if owner is not None:
            raise TitleConflictError(f"title {title!r} is already in use by session {owner}")

    def title_owner(self, title: str, excluding: str) -> str | None:
        """The id of another session that already has ``title``, if any."""
        return self._c.execute(self._r.title_owner, {"p_title": title, "p_id": excluding}).scalar()

    def by_title(self, title: str) -> SessionRecord | None:
        """The session holding exactly this title, if any."""
        title = text_arg("title", title)
        row = self._c.execute(self._r.by_title, {"p_title": title}).mappings().first()
        return None if row is None else SessionRecord(**row)

    def resolve_by_title(self, title: str) -> str | None:
        """The newest session of the lineage: "T #3" beats "T #2" beats "T"."""
        title = text_arg("title", title)
        ranked = [
            (number, started_at, session_id)
            for session_id, stored, started_at in self._title_family(title)
            if (number := lineage_number(stored, title)) is not None
        ]
        return max(ranked)[2] if ranked else None

    def next_title_in_lineage(self, base_title: str) -> str:
        """ "Fix Docker Build" -> "Fix Docker Build #2" (or the next free number)."""
        base_title = text_arg("base_title", base_title)
        base = lineage_base(base_title)
        return next_in_lineage(base, (stored for _, stored, _ in self._title_family(base)))

    def _title_family(self, base: str) -> list[tuple[str, str, float]]:
        """(id, title, started_at) of the sessions titled ``base`` or ``base #<anything>``.

        Case-sensitive, as the numbering is; plain tuples, since a lineage of a
        cron job's sessions runs to thousands of rows.
        """
        backend = self._backend
        params = backend.title_family_params(base)
        rows = self._title_family_statement(backend).rows(self._c, params)
        return [(row[0], row[1], row[2]) for row in rows]

    def _title_family_statement(self, backend: Backend) -> Prepared:
        """The backend's lineage statement in this layout (cached per layout and backend)."""
        statement = self._r.title_family.get(backend.name)
        if statement is None:
            statement = Prepared(_in_layout(backend.title_family_sql(), self._layout))
            self._r.title_family[backend.name] = statement
        return statement

    def _insert_if_absent_statement(self) -> Any:
        """The old code's INSERT OR IGNORE as this backend takes it, built on first use.

        A second create of an id changes nothing, even when two writers race:
        PostgreSQL's READ COMMITTED lets both pass an existence check, and the
        primary key then decides without an error.
        """
        backend = self._backend
        statement = self._r.insert_if_absent.get(backend.name)
        if statement is None:
            statement = backend.insert_if_absent(self._r.writable)
            self._r.insert_if_absent[backend.name] = statement
        return statement

    # -- documented queries ---------------------------------------------
    def ancestors(self, session_id: str) -> list[LineageEntry]:
        """The session, its parent, grandparent, ... (recursive CTE of the document)."""
        text_arg("session_id", session_id)
        return [LineageEntry(**row) for row in self._rows(self._r.ancestors, {"p_id": session_id})]

    def descendants(self, session_id: str) -> list[LineageEntry]:
        """The session and every session split off it, transitively."""
        text_arg("session_id", session_id)
        rows = self._rows(self._r.descendants, {"p_id": session_id})
        return [LineageEntry(**row) for row in rows]

    def recent(self, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
        """The document's recent-sessions query: newest first, a raw 63-character preview."""
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return self._rows(self._r.recent, params)

    def listing(
        self,
        *,
        source: str | None = None,
        exclude_sources: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        project_compression_tips: bool = True,
    ) -> list[dict[str, Any]]:
        """The old class's listing: one entry per conversation, newest start first.

        Rows carry every column of ``sessions``, ``preview`` (first user
        message, one line, 60 characters and ``...``) and ``last_active``;
        children are left out unless ``include_children``; a compression
        root is shown as its tip, with ``_lineage_root_id`` naming the root
        (see :mod:`~hermes_store.repositories.listing`) unless
        ``project_compression_tips`` is False or children are included.
        ``limit`` and ``offset`` count the listed entries.
        """
        source, limit, offset = _page(source, limit, offset)
        excluded = names_arg("exclude_sources", exclude_sources) or []
        include_children = bool_arg("include_children", include_children)
        project = bool_arg("project_compression_tips", project_compression_tips)
        rows = _listing.page(
            self._c,
            self._layout,
            source=source,
            exclude_sources=excluded,
            limit=limit,
            offset=offset,
            include_children=include_children,
        )
        roots = _listing.compression_roots(rows)
        if not project or include_children or not roots:
            return rows
        return _listing.project(rows, _listing.tip_rows(self._c, self._layout, roots))

    def compression_tip(self, session_id: str) -> str:
        """The newest compression continuation of ``session_id``, else ``session_id`` itself.

        Follows children whose parent ended with ``end_reason =
        'compression'`` and that started at or after the parent's end, to the
        last one (at most 100 steps); an unknown id is its own tip.
        """
        text_arg("session_id", session_id)
        return _listing.tip_ids(self._c, self._layout, [session_id]).get(session_id, session_id)

    def page(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[SessionRecord]:
        """One page of sessions, newest first, every session listed (children included)."""
        source, limit, offset = _page(source, limit, offset)
        params = {"p_source": source, "p_limit": limit, "p_offset": offset}
        return [SessionRecord(**row) for row in self._rows(self._r.list, params)]

    def all(self, source: str | None = None) -> list[SessionRecord]:
        """Every session (of one source, or all), newest first, unpaged: for exports."""
        text_arg("source", source, optional=True)
        return [SessionRecord(**row) for row in self._r.all.dicts(self._c, {"p_source": source})]

    def column_order(self) -> tuple[str, ...]:
        """The ``sessions`` columns in the order of this file's (or database's) table.

        The old class exported ``SELECT *`` rows, so its keys came in the
        table's order -- which depends on the file's history (columns added by
        ``ALTER TABLE`` come last) -- and people diff exports.
        """
        return tuple(self._c.execute(_NO_ROW).keys())

    def count(self, source: str | None = None) -> int:
        """How many sessions the store holds (of one source, or all)."""
        text_arg("source", source, optional=True)
        return int(self._c.execute(self._r.count, {"p_source": source}).scalar_one())

    def token_usage_by_model(self) -> list[ModelUsage]:
        """Token and cost totals per model, the costliest first (the document's query).

        Read from the kept totals where the backend trusts them (the same rows;
        a cost may differ from ``SUM``'s in its last bits, see
        :mod:`hermes_store.schema.totals`), else aggregated from ``sessions``.
        """
        kept = self._backend.kept_usage(self._c) if self._kept_totals() else None
        if kept is not None:
            return [ModelUsage(**row) for row in kept]
        return [ModelUsage(**row) for row in self._rows(self._r.tokens_by_model, {})]

    def _kept_totals(self) -> bool:
        """Whether this store may hold kept totals (the backend then says if they are trusted)."""
        return self._layout.kept_totals and self._backend.keeps_totals

    def top_by_tokens(self, limit: int = 10) -> list[TopSession]:
        """The sessions with the most input + output tokens (the document's query)."""
        limit = int_arg("limit", limit, minimum=0)
        return [TopSession(**row) for row in self._rows(self._r.top_by_tokens, {"p_limit": limit})]

    # -- plumbing --------------------------------------------------------
    def _changed(self, statement: Any, params: dict[str, Any]) -> bool:
        return self._c.execute(statement, params).rowcount > 0

    def _rows(self, statement: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(row) for row in self._c.execute(statement, params).mappings()]

    @staticmethod
    def _require(found: bool, session_id: str) -> None:
        if not found:
            raise SessionNotFoundError(session_id)


def _page(source: str | None, limit: int, offset: int) -> tuple[str | None, int, int]:
    return (
        text_arg("source", source, optional=True),
        int_arg("limit", limit, minimum=0),
        int_arg("offset", offset, minimum=0),
    )


_RESTORED_TEXT = (
    "source",
    "user_id",
    "model",
    "system_prompt",
    "end_reason",
    *BILLING_LABELS,
)


def _restored_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """The checked row of a session an export gave back (see :meth:`SessionRepository.restore`)."""
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"a session must be a dict, got {type(values).__name__}")
    unknown = values.keys() - set(SESSION_COLUMNS)
    if unknown:
        raise InvalidInputError(f"unknown session fields: {', '.join(sorted(map(repr, unknown)))}")
    row: dict[str, Any] = {name: values.get(name) for name in SESSION_COLUMNS}
    row["id"] = text_arg("id", row["id"], non_empty=True)
    for name in _RESTORED_TEXT:
        row[name] = text_arg(name, row[name], optional=name != "source", non_empty=name == "source")
    row["parent_session_id"] = text_arg(
        "parent_session_id", row["parent_session_id"], optional=True
    )
    config = row["model_config"]
    row["model_config"] = (
        config if config is None or isinstance(config, str) else json_arg("model_config", config)
    )
    if isinstance(row["model_config"], str):
        text_arg("model_config", row["model_config"])
    row["started_at"] = number_arg("started_at", row["started_at"])
    row["ended_at"] = number_arg("ended_at", row["ended_at"], optional=True)
    for name in TOKEN_COUNTERS:
        row[name] = int_arg(name, row[name] or 0, minimum=0)
    for name in COST_FIELDS:
        row[name] = number_arg(name, row[name], optional=True, minimum=0.0)
    row["title"] = clean_title(row["title"])
    row["message_count"] = 0
    row["tool_call_count"] = 0
    return row
