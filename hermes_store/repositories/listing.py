"""The session listing as the old class shows it: one entry per conversation.

The design document's "recent sessions" query lists every session with the
raw first 63 characters of its first user message. The old class, whose
listing dashboards and ``/resume`` pickers were written against, shows less
and means more:

* child sessions (delegate subagents, branches, compression continuations)
  are hidden unless asked for;
* a conversation that context compression split into a chain of sessions is
  listed once, under its newest continuation (the *tip*): the tip's id,
  title, counters, preview and activity, the root's start time and place in
  the order;
* ``preview`` has ``\\n`` and ``\\r`` replaced by spaces, is stripped, and is
  cut to 60 characters plus ``...`` when longer.

A compression continuation is a child whose parent ended with
``end_reason = 'compression'`` and that started at or after the parent's
``ended_at``; children started while the parent was live (subagents,
branches) are not. Following the newest continuation from session to session
gives the tip; the walk stops after 100 steps, as the old code's did.

A page costs two statements, whatever its size: the page of root rows, then
(only if the page holds compression roots) one recursive query that walks all
their chains and returns the tips' rows. Both run off the indexes on
``started_at``, ``parent_session_id`` and ``messages(session_id, timestamp)``,
so a page costs the same two statements whatever the store's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, Text, bindparam, text
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import BindParameter, TextClause

from hermes_store.backends import backend_of
from hermes_store.backends.base import Backend
from hermes_store.backends.layout import (
    LIVE_ROOTS_LISTING_INDEX,
    LIVE_ROOTS_SOURCE_LISTING_INDEX,
    PINNED_INDEX,
    ROOTS_LISTING_INDEX,
    ROOTS_SOURCE_LISTING_INDEX,
    Layout,
)
from hermes_store.backends.shapes import session_columns, sessions_from, shadowed

FULL_LISTING_INDEX = "idx_sessions_listing"
"""Revision 0010's index of every session in the listing's order (there wherever 0011's are)."""

PREVIEW_CHARS = 60
"""How much of the first user message a listing shows; ``...`` marks that there is more."""
MAX_CHAIN_STEPS = 100
"""How far the tip walk follows continuations (the old code's bound: deeper is a loop)."""
COMPRESSION = "compression"

# The columns of a listed session: the documented row (shaped for the file: see
# repositories.shapes), its preview's raw text and its last activity.
# The old code's preview is SUBSTR(REPLACE(REPLACE(content, LF, ' '), CR, ' '), 1, 63);
# replacing after the cut gives the same text without rewriting the whole message. LF and
# CR are parameters because the two backends spell those characters differently in SQL.
_LISTED_COLUMNS = """
    {columns},
    COALESCE(
        (SELECT REPLACE(REPLACE(SUBSTR(m.content, 1, 63), :p_lf, ' '), :p_cr, ' ')
         FROM messages m
         WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
         ORDER BY m.timestamp, m.id LIMIT 1),
        ''
    ) AS preview,
    COALESCE(
        (SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id),
        s.started_at
    ) AS last_active,
    {flags}
"""
_NEWLINES = {"p_lf": "\n", "p_cr": "\r"}
_PREVIEW_PARAMS = (bindparam("p_lf", type_=Text), bindparam("p_cr", type_=Text))

# Each root's chain of compression continuations, one newest child per step (ties on
# started_at go to the larger id, so every step has one row), and the tip: its last step.
_CHAINS = """
WITH RECURSIVE chain(root_id, id, depth) AS (
    SELECT id, id, 0 FROM sessions WHERE id IN :p_roots
    UNION ALL
    SELECT chain.root_id, child.id, chain.depth + 1
    FROM chain
    JOIN sessions parent ON parent.id = chain.id
    JOIN sessions child ON child.parent_session_id = parent.id
    WHERE parent.end_reason = 'compression'
      AND child.started_at >= parent.ended_at
      AND chain.depth < :p_max_steps
      AND NOT EXISTS (
          SELECT 1 FROM sessions newer
          WHERE newer.parent_session_id = parent.id
            AND (newer.started_at > child.started_at
                 OR (newer.started_at = child.started_at AND newer.id > child.id))
      )
),
tip AS (
    SELECT root_id, id FROM chain
    WHERE depth = (SELECT MAX(c.depth) FROM chain c WHERE c.root_id = chain.root_id)
)
"""
_CHAIN_PARAMS: tuple[BindParameter[Any], ...] = (
    bindparam("p_roots", expanding=True),
    bindparam("p_max_steps", type_=Integer),
)


@lru_cache(maxsize=16)
def _tip_ids_statement(layout: Layout) -> TextClause:
    """Each given root and its tip (itself when it has no continuation)."""
    sql = _CHAINS + "SELECT root_id, id FROM tip"
    return text(shadowed(sql, layout)).bindparams(*_CHAIN_PARAMS)


@lru_cache(maxsize=16)
def _listed_columns(layout: Layout) -> str:
    """The listed row: the documented columns, preview, last activity and the agent's
    ``archived``/``pinned`` flags (0 on a file that has none), as its listing rows carry."""
    flags = "s.archived, s.pinned" if layout.keeps_flags else "0 AS archived, 0 AS pinned"
    return _LISTED_COLUMNS.format(columns=session_columns(layout), flags=flags)


@lru_cache(maxsize=16)
def _tip_rows_statement(layout: Layout) -> TextClause:
    """The listed rows of the tips of the given roots that have a continuation.

    ``CROSS JOIN`` keeps SQLite from reordering the join: the few tips drive
    the look-ups of their sessions (some releases' planners otherwise scan
    every session and probe the tips). PostgreSQL reads it as a plain join.
    """
    sql = f"""{_CHAINS}
        SELECT tip.root_id AS lineage_root_id, {_listed_columns(layout)}
        FROM tip CROSS JOIN {sessions_from(layout)}
        WHERE s.id = tip.id AND tip.id <> tip.root_id
        """
    return text(shadowed(sql, layout)).bindparams(*_CHAIN_PARAMS, *_PREVIEW_PARAMS)


TIP_FIELDS = (
    "id",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "title",
    "last_active",
    "preview",
    "model",
    "system_prompt",
)
"""What a listed conversation shows of its tip; every other field is the root's."""
LINEAGE_ROOT_KEY = "_lineage_root_id"
"""Set on a projected entry only: the id of the session the conversation started as."""


# "Roots only" and the page's order are each backend's own (Backend.roots_only_condition,
# Backend.page_order: SQLite keeps the term off an index with the unary +).
# Where revision 0011's partial indexes of root sessions are there, SQLite is told to walk
# them (INDEXED BY: a plan that cannot change with statistics): every entry is a root, so
# an OFFSET skips entries without reading them -- the term matches the index's WHERE and
# is not tested per entry. Their order is the full index's for roots (ties on started_at
# by source and id; by id within one source), so a page holds the same rows as before.
_ROOTS_INDEXED = "s.parent_session_id IS NULL"
_ROOTS_INDEX = {False: ROOTS_LISTING_INDEX, True: ROOTS_SOURCE_LISTING_INDEX}
# Archived sessions left out (the default): revision 0016's partial indexes hold only the
# roots not archived, so the walk skips an OFFSET without reading a row, as above.
_LIVE_ROOTS_INDEXED = "s.parent_session_id IS NULL AND s.archived = 0"
_LIVE_ROOTS_INDEX = {False: LIVE_ROOTS_LISTING_INDEX, True: LIVE_ROOTS_SOURCE_LISTING_INDEX}
_NOT_ARCHIVED = "s.archived = 0"


# The page in the order of the full listing index (revision 0010), ties included, whatever
# plan the outer query gets; on PostgreSQL the start time alone, as before.
# Every session, walked from the oldest end: the full index backwards, tie for tie.
_FROM_OLDEST = f"""
    SELECT s.id FROM sessions s INDEXED BY {FULL_LISTING_INDEX}
    ORDER BY s.started_at ASC, s.parent_session_id DESC, s.source DESC, s.id DESC
    LIMIT :p_limit OFFSET :p_offset
"""
_SESSION_COUNT = text("SELECT COUNT(*) FROM sessions")


@lru_cache(maxsize=64)
def _page_statement(
    layout: Layout,
    backend: Backend,
    roots_only: bool,
    by_source: bool,
    excluding: bool,
    from_oldest: bool = False,
    live_only: bool = False,
    archived_only: bool = False,
) -> TextClause:
    """The page of listed sessions, newest start first, for one combination of filters.

    The page's ids are chosen first and only its rows get a preview and a
    last activity: a filter that the planner answers from an index and a
    sort (one source of many) then sorts ids, not correlated subqueries.
    ``from_oldest``: every session, the page counted from the other end (see :func:`page`).
    ``live_only``: archived sessions left out (the file has the flags).
    """
    conditions = []
    params = list(_PREVIEW_PARAMS)
    walked = "sessions s"
    if roots_only and live_only and backend.names_indexes and layout.live_listing:
        walked = f"sessions s INDEXED BY {_LIVE_ROOTS_INDEX[by_source]}"
        conditions.append(_LIVE_ROOTS_INDEXED)
    elif roots_only and backend.names_indexes and layout.roots_listing:
        walked = f"sessions s INDEXED BY {_ROOTS_INDEX[by_source]}"
        conditions.append(_ROOTS_INDEXED)
    elif roots_only:
        conditions.append(backend.roots_only_condition())
    if live_only and not (roots_only and backend.names_indexes and layout.live_listing):
        conditions.append(_NOT_ARCHIVED)
    if archived_only:
        conditions.append("s.archived <> 0")
    if by_source:
        conditions.append("s.source = :p_source")
        params.append(bindparam("p_source", type_=Text))
    if excluding:
        conditions.append("s.source NOT IN :p_excluded")
        params.append(bindparam("p_excluded", expanding=True))
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    # Children listed with a flag tested per row: the full listing order, so the planner
    # walks revision 0010's index (ties as in a listing without the test) and stops at the page.
    order = (
        backend.page_order()
        if (live_only or archived_only) and not roots_only
        else ("s.started_at DESC")
    )
    chosen = f"""
            SELECT s.id FROM {walked}
            {where}
            ORDER BY {order}
            LIMIT :p_limit OFFSET :p_offset"""
    sql = f"""
        SELECT {_listed_columns(layout)}
        FROM {sessions_from(layout)}
        JOIN ({_FROM_OLDEST if from_oldest else chosen}) page ON page.id = s.id
        ORDER BY {backend.page_order()}
        """
    return text(shadowed(sql, layout)).bindparams(*params)


def finish_preview(raw: str) -> str:
    """The old listing's preview from its raw cut (newlines already spaces).

    Stripped, then 60 characters and ``...`` when the stripped cut is longer.
    The cut is the first 63 characters, taken before stripping, exactly as
    the old code did; so leading or trailing blanks around the 60th
    character can hide that a long message goes on.
    """
    stripped = raw.strip()
    if len(stripped) > PREVIEW_CHARS:
        return stripped[:PREVIEW_CHARS] + "..."
    return stripped


def _finished(row: RowMapping) -> dict[str, Any]:
    listed: dict[str, Any] = dict(row)
    listed["preview"] = finish_preview(listed["preview"])
    return listed


def page(
    connection: Connection,
    layout: Layout,
    *,
    source: str | None,
    exclude_sources: Sequence[str],
    limit: int,
    offset: int,
    include_children: bool,
    include_archived: bool = True,
    archived_only: bool = False,
) -> list[dict[str, Any]]:
    """One page of listed sessions (previews finished), before any projection.

    An OFFSET walks every index entry before the page. A page of every
    session (no filter) past the middle is counted
    from the oldest end instead -- the full listing index walked backwards,
    which yields the same entries in reverse -- after a ``COUNT(*)`` of
    ``sessions``, which SQLite answers from its smallest index's page
    headers: the last page costs what the first does.
    """
    backend = backend_of(connection)
    requested = (limit, offset)
    if archived_only and not layout.keeps_flags:
        return []  # a file without the flags has nothing archived
    live_only = not include_archived and not archived_only and layout.keeps_flags
    everything = (
        include_children
        and source is None
        and not exclude_sources
        and not live_only
        and not archived_only
    )
    from_oldest = False
    if everything and backend.names_indexes and layout.roots_listing and offset > 0:
        total = int(connection.execute(_SESSION_COUNT).scalar_one())
        if offset >= total:
            return []
        if offset > total - offset:
            from_oldest = True
            limit, offset = min(limit, total - offset), max(0, total - offset - limit)
    params: dict[str, Any] = {**_NEWLINES, "p_limit": limit, "p_offset": offset}
    if source is not None:
        params["p_source"] = source
    if exclude_sources:
        params["p_excluded"] = list(exclude_sources)
    filters = (not include_children, source is not None, bool(exclude_sources))
    statement = _page_statement(layout, backend, *filters, from_oldest, live_only, archived_only)
    try:
        rows = connection.execute(statement, params).mappings().all()
    except OperationalError as error:
        # A file at our head is trusted to have its indexes; one dropped by hand makes the
        # named walk a prepare error, which leaves the transaction as it was: walk unnamed.
        if not (layout.roots_listing or layout.live_listing) or "no such index" not in str(
            error.orig
        ):
            raise
        unnamed = replace(layout, roots_listing=False, live_listing=False)
        if from_oldest:  # the same page counted from the newest end, as the planner likes
            params["p_limit"], params["p_offset"] = requested
        statement = _page_statement(
            unnamed, backend, *filters, live_only=live_only, archived_only=archived_only
        )
        rows = connection.execute(statement, params).mappings().all()
    return [_finished(row) for row in rows]


def tip_ids(connection: Connection, layout: Layout, session_ids: Iterable[str]) -> dict[str, str]:
    """``{session id: its compression tip}`` for each id that exists (itself when no chain)."""
    params = {"p_roots": list(session_ids), "p_max_steps": MAX_CHAIN_STEPS}
    statement = _tip_ids_statement(layout)
    return {root: tip for root, tip in connection.execute(statement, params)}


def tip_rows(
    connection: Connection, layout: Layout, root_ids: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """``{root id: the listed row of its tip}`` for the roots that have a continuation."""
    params = {**_NEWLINES, "p_roots": list(root_ids), "p_max_steps": MAX_CHAIN_STEPS}
    rows = connection.execute(_tip_rows_statement(layout), params).mappings()
    return {row["lineage_root_id"]: _finished(row) for row in rows}


def project(
    listed: Sequence[dict[str, Any]], tips: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each compression root of ``listed`` shown as its tip; every other row as it is."""
    projected = []
    for row in listed:
        tip = tips.get(row["id"]) if row.get("end_reason") == COMPRESSION else None
        if tip is None:
            projected.append(row)
            continue
        merged = {**row, **{key: tip[key] for key in TIP_FIELDS}}
        merged[LINEAGE_ROOT_KEY] = row["id"]
        projected.append(merged)
    return projected


def compression_roots(listed: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of the listed rows that ended by compression (candidates for a tip)."""
    return [row["id"] for row in listed if row.get("end_reason") == COMPRESSION]


# The pinned sessions a first page adds: the listing's filters, pinned, newest first.
_PINNED = """
    SELECT {columns}
    FROM {sessions}
    JOIN (SELECT s.id FROM {walked} WHERE {where} ORDER BY s.started_at DESC LIMIT :p_cap) kept
      ON kept.id = s.id
    ORDER BY {order}
"""
PINNED_CAP = 200
"""At most this many pinned sessions are added to a first page (a sidebar, not an export)."""


@lru_cache(maxsize=32)
def _pinned_statement(
    layout: Layout,
    backend: Backend,
    roots_only: bool,
    by_source: bool,
    excluding: bool,
    live_only: bool,
) -> TextClause:
    conditions = ["s.pinned <> 0"]
    params = list(_PREVIEW_PARAMS)
    # The few pinned sessions, from revision 0016's index of them: walked by name where
    # the backend names indexes (a planner without statistics prefers the listing's own).
    walked = "sessions s"
    if backend.names_indexes and layout.live_listing:
        walked = f"sessions s INDEXED BY {PINNED_INDEX}"
    if roots_only:
        conditions.append(backend.roots_only_condition())
    if live_only:
        conditions.append(_NOT_ARCHIVED)
    if by_source:
        conditions.append("s.source = :p_source")
        params.append(bindparam("p_source", type_=Text))
    if excluding:
        conditions.append("s.source NOT IN :p_excluded")
        params.append(bindparam("p_excluded", expanding=True))
    sql = _PINNED.format(
        walked=walked,
        columns=_listed_columns(layout),
        sessions=sessions_from(layout),
        where=" AND ".join(conditions),
        order=backend.page_order(),
    )
    return text(shadowed(sql, layout)).bindparams(*params)


def pinned(
    connection: Connection,
    layout: Layout,
    *,
    source: str | None,
    exclude_sources: Sequence[str],
    include_children: bool,
    include_archived: bool,
) -> list[dict[str, Any]]:
    """The pinned sessions the listing's filters admit (previews finished), newest first."""
    if not layout.keeps_flags:
        return []
    backend = backend_of(connection)
    live_only = not include_archived
    params: dict[str, Any] = {**_NEWLINES, "p_cap": PINNED_CAP}
    if source is not None:
        params["p_source"] = source
    if exclude_sources:
        params["p_excluded"] = list(exclude_sources)
    statement = _pinned_statement(
        layout, backend, not include_children, source is not None, bool(exclude_sources), live_only
    )
    return [_finished(row) for row in connection.execute(statement, params).mappings()]
