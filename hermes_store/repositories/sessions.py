"""Sessions: their lifecycle and the documented queries; :class:`SessionRepository`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    delete,
    text,
)
from sqlalchemy import update as sql_update
from sqlalchemy.engine import Connection

from hermes_store.backends.layout import SESSION_COLUMNS, STANDARD, Layout
from hermes_store.backends.prepared import Prepared
from hermes_store.domain.arguments import (
    bool_arg,
    int_arg,
    json_arg,
    names_arg,
    number_arg,
    text_arg,
)
from hermes_store.domain.records import LineageEntry, SessionRecord
from hermes_store.domain.titles import clean_title
from hermes_store.domain.usage import (
    BILLING_LABELS,
    COST_FIELDS,
    TOKEN_COUNTERS,
)
from hermes_store.errors import InvalidInputError, SessionNotFoundError
from hermes_store.repositories import listing as _listing
from hermes_store.repositories.session_base import (
    DROP_UNUSED_PROMPTS,
    STANDARD_READS,
    STORE_PROMPT,
    M,
    S,
    page_args,
    param,
    prompt_hash,
    reads_for,
    sourced,
    update_by_id,
)
from hermes_store.repositories.session_pruning import (
    SessionPruning,
)
from hermes_store.repositories.session_titles import SessionTitles
from hermes_store.repositories.session_usage import SessionUsage

_COUNT_LIVE = Prepared(
    sourced(
        "SELECT (SELECT COUNT(*) FROM sessions WHERE (:p_source IS NULL OR source = :p_source))"
        " - (SELECT COUNT(*) FROM sessions WHERE archived <> 0"
        " AND (:p_source IS NULL OR source = :p_source))"
    )
)
"""Sessions not archived: the whole count less the archived ones, in one statement."""
_AT_LEAST = sourced(
    "SELECT COUNT(*) FROM (SELECT 1 FROM sessions "
    "WHERE (:p_source IS NULL OR source = :p_source) LIMIT :p_n) found"
)
_AT_LEAST_LIVE = sourced(
    "SELECT COUNT(*) FROM (SELECT 1 FROM sessions "
    "WHERE archived = 0 AND (:p_source IS NULL OR source = :p_source) LIMIT :p_n) found"
)
_SESSION_FIELDS = ("user_id", "model", "model_config", "system_prompt", "parent_session_id")

_EXISTS = Prepared(text("SELECT id FROM sessions WHERE id = :p_id"))

_NO_ROW = text("SELECT * FROM sessions WHERE 0 = 1")
"""No row, only the columns ``SELECT *`` gives, in the table's own order, on either backend."""

# Only an open session is ended: the first end (time and reason) stays, as in the old code.
_END = (
    update_by_id()
    .where(S.c.ended_at.is_(None))
    .values(ended_at=param("at"), end_reason=param("reason"))
)

_REOPEN = update_by_id().values(ended_at=None, end_reason=None)

_SET_PROMPT = update_by_id().values(system_prompt=param("prompt"))

_ORPHAN_CHILDREN = (
    sql_update(S).where(S.c.parent_session_id == param("id")).values(parent_session_id=None)
)

_DELETE = delete(S).where(S.c.id == param("id"))

_DELETE_MESSAGES = delete(M).where(M.c.session_id == param("id"))

_SET_PROMPT_HASH = text(
    "UPDATE sessions SET system_prompt_hash = :p_hash, system_prompt = NULL WHERE id = :p_id"
)


def insert_session_row(connection: Connection, layout: Layout, values: Mapping[str, Any]) -> None:
    """Insert a session row as given (an id taken is an IntegrityError); no rule applied.

    For the tools that move whole stores as they are stored -- an import
    writes the counters of the messages it holds beside them -- not
    for services, which create sessions through :class:`SessionRepository`.
    """
    reads = STANDARD_READS if layout is STANDARD else reads_for(layout)
    row = dict(values)
    if reads.system_prompts:
        prompt = row.get("system_prompt")
        row["system_prompt"] = None
        row["system_prompt_hash"] = None
        if prompt is not None:
            row["system_prompt_hash"] = prompt_hash(prompt)
            connection.execute(
                STORE_PROMPT, {"p_hash": row["system_prompt_hash"], "p_prompt": prompt}
            )
    connection.execute(reads.insert, row)


_LINK_PARENT = (
    sql_update(S)
    .where(S.c.id == param("id"), S.c.parent_session_id.is_(None))
    .values(parent_session_id=param("parent"))
)


class SessionRepository(SessionTitles, SessionUsage, SessionPruning):
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
    ``system_prompts``, as the agent's code keeps it."""

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
            self._c.execute(DROP_UNUSED_PROMPTS)  # the prompt stored for a row not written
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
            self._c.execute(DROP_UNUSED_PROMPTS)
        self._require(changed, session_id)

    def delete(self, session_id: str) -> bool:
        """Delete a session and its messages; True if it existed. Children become roots."""
        text_arg("session_id", session_id)
        self._backend.refuse_broken_deletes(self._c, self._layout, (session_id,))
        self._c.execute(_ORPHAN_CHILDREN, {"p_id": session_id})
        self._c.execute(_DELETE_MESSAGES, {"p_id": session_id})
        deleted = self._changed(_DELETE, {"p_id": session_id})
        if deleted and self._r.system_prompts:
            self._c.execute(DROP_UNUSED_PROMPTS)
        return deleted

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

    def ancestors(self, session_id: str) -> list[LineageEntry]:
        """The session, its parent, grandparent, ... (recursive CTE of the document)."""
        text_arg("session_id", session_id)
        return [LineageEntry(**row) for row in self._rows(self._r.ancestors, {"p_id": session_id})]

    def descendants(self, session_id: str) -> list[LineageEntry]:
        """The session and every session split off it, transitively."""
        text_arg("session_id", session_id)
        rows = self._rows(self._r.descendants, {"p_id": session_id})
        return [LineageEntry(**row) for row in rows]

    def listing(
        self,
        *,
        source: str | None = None,
        exclude_sources: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        project_compression_tips: bool = True,
        include_archived: bool = False,
        include_pinned: bool = False,
        archived_only: bool = False,
    ) -> list[dict[str, Any]]:
        """The old class's listing: one entry per conversation, newest start first.

        Rows carry every column of ``sessions``, ``preview`` (first user
        message, one line, 60 characters and ``...``) and ``last_active``;
        children are left out unless ``include_children``; a compression
        root is shown as its tip, with ``_lineage_root_id`` naming the root
        (see :mod:`~hermes_store.repositories.listing`) unless
        ``project_compression_tips`` is False or children are included.
        ``limit`` and ``offset`` count the listed entries. Archived sessions
        are left out unless ``include_archived``; ``include_pinned`` adds,
        on the first page only (``offset`` 0), the pinned sessions the
        filters admit that the page does not hold, after its ``limit`` rows.
        ``archived_only`` lists the archived sessions alone (``hermes-store
        sessions --archived``). Each row carries the agent's ``archived`` and
        ``pinned`` flags (0 on a file without them).
        """
        source, limit, offset = page_args(source, limit, offset)
        excluded = names_arg("exclude_sources", exclude_sources) or []
        include_children = bool_arg("include_children", include_children)
        project = bool_arg("project_compression_tips", project_compression_tips)
        include_archived = bool_arg("include_archived", include_archived)
        include_pinned = bool_arg("include_pinned", include_pinned)
        archived_only = bool_arg("archived_only", archived_only)
        rows = _listing.page(
            self._c,
            self._layout,
            source=source,
            exclude_sources=excluded,
            limit=limit,
            offset=offset,
            include_children=include_children,
            include_archived=include_archived,
            archived_only=archived_only,
        )
        if include_pinned and offset == 0:
            listed = {row["id"] for row in rows}
            rows += [
                row
                for row in _listing.pinned(
                    self._c,
                    self._layout,
                    source=source,
                    exclude_sources=excluded,
                    include_children=include_children,
                    include_archived=include_archived,
                )
                if row["id"] not in listed
            ]
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
        source, limit, offset = page_args(source, limit, offset)
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

    def count(self, source: str | None = None, include_archived: bool = True) -> int:
        """How many sessions the store holds (of one source, or all), archived ones or not.

        Without the archived ones: the whole count less the archived, which
        revision 0016's partial index holds (few rows), so it costs what the
        whole count does.
        """
        text_arg("source", source, optional=True)
        include_archived = bool_arg("include_archived", include_archived)
        if include_archived or not self._layout.keeps_flags:
            return int(self._c.execute(self._r.count, {"p_source": source}).scalar_one())
        return int(_COUNT_LIVE.scalar(self._c, {"p_source": source}))

    def count_at_least(
        self, n: int, source: str | None = None, include_archived: bool = False
    ) -> bool:
        """Whether there are at least ``n`` sessions: reads ``n`` index entries at most."""
        n = int_arg("n", n, minimum=0)
        text_arg("source", source, optional=True)
        include_archived = bool_arg("include_archived", include_archived)
        live = include_archived or not self._layout.keeps_flags
        statement = _AT_LEAST if live else _AT_LEAST_LIVE
        found = self._c.execute(statement, {"p_source": source, "p_n": n}).scalar_one()
        return int(found) >= n


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
