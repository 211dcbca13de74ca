"""``SessionDB``: the documented API of the old ``hermes_state.SessionDB``, drop-in.

Every method is one unit of work on the injected (or self-made) store, so a
method either happens completely or not at all. Arguments are checked before
the transaction starts; a rejected call leaves the database as it was.
Return shapes (plain dicts, JSON fields decoded on read) follow the old class
so agent code does not change.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.postgresql.engine import retrying
from hermes_store.domain.arguments import (
    INT64_MAX,
    decode_json,
    int_arg,
    json_arg,
    names_arg,
    number_arg,
    text_arg,
)
from hermes_store.domain.query_syntax import query_items, sanitize_fts5_query
from hermes_store.domain.substrings import (
    TRIGRAM,
    has_cjk,
    make_snippet,
    substring_query,
)
from hermes_store.domain.titles import (
    MAX_TITLE_LENGTH,
    clean_title,
    lineage_base,
    lineage_number,
    next_in_lineage,
)
from hermes_store.errors import (
    InvalidInputError,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_store.repositories.search import rejected_query
from hermes_store.repositories.sessions import (
    BILLING_LABELS,
    COST_FIELDS,
    TOKEN_COUNTERS,
)
from hermes_store.schema.layout import TRIGRAM_INDEX
from hermes_store.uow.store import Store
from hermes_store.uow.unit import UnitOfWork

SECONDS_PER_DAY = 86400.0
JSON_MESSAGE_FIELDS = ("tool_calls", "reasoning_details", "codex_reasoning_items")
_OPTIONAL_TEXT_FIELDS = ("content", "tool_call_id", "tool_name", "finish_reason", "reasoning")


def _decoded(message: dict[str, Any]) -> dict[str, Any]:
    for field in JSON_MESSAGE_FIELDS:
        if message.get(field):
            message[field] = decode_json(message[field])
    return message


def _tool_call_total(tool_calls: Any) -> int:
    """How many calls a message carries: a list counts its items, anything else is one."""
    if not tool_calls:
        return 0
    return len(tool_calls) if isinstance(tool_calls, list | tuple) else 1


class SessionDB:
    """Session storage with FTS5 search, on SQLite by default.

    ``durability="normal"`` trades the last commits before a power loss for
    faster writes (see :mod:`hermes_store.backends.durability`); the default keeps
    every returned write on the disk, as the old store did. ``read_only=True``
    opens the file for reading only (see :class:`~hermes_store.uow.store.Store`):
    every write method then raises :class:`~hermes_store.errors.ReadOnlyStoreError`.
    """

    MAX_TITLE_LENGTH = MAX_TITLE_LENGTH

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        policy: ContentionPolicy | None = None,
        durability: Durability | str | None = None,
        read_only: bool | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if store is not None and db_path is not None:
            raise InvalidInputError("pass either db_path or store, not both")
        if store is not None and (
            policy is not None or durability is not None or read_only is not None
        ):
            # Silently ignoring them would run a store on settings the caller did not ask for.
            raise InvalidInputError(
                "policy, durability and read_only are the store's: pass them to Store(), "
                "not with store="
            )
        self._store = store or Store(
            db_path,
            policy=policy,
            durability=Durability.FULL if durability is None else durability,
            read_only=False if read_only is None else read_only,
        )
        self._owns_store = store is None
        self._clock = clock
        self.db_path = self._store.path

    @property
    def store(self) -> Store:
        return self._store

    def close(self) -> None:
        """Release the connections (only those of a store this object made)."""
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> SessionDB:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------
    # Session lifecycle
    # ------------------------------------------------------------------
    @retrying
    def create_session(
        self,
        session_id: str,
        source: str,
        model: str | None = None,
        model_config: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
        user_id: str | None = None,
        parent_session_id: str | None = None,
    ) -> str:
        """Create a session record unless the id exists; returns ``session_id`` either way.

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
        self._add_if_absent(session_id, source, fields)
        return session_id

    @retrying
    def ensure_session(
        self, session_id: str, source: str = "unknown", model: str | None = None
    ) -> None:
        """Make sure a session row exists: a minimal one if absent, else nothing changes.

        The agent calls this before flushing messages, to recover from a
        ``create_session`` that failed (a lock at start-up); an existing
        session keeps its source, model and everything else. Returns None.
        """
        self._add_if_absent(session_id, source, {"model": text_arg("model", model, optional=True)})

    def _add_if_absent(self, session_id: str, source: str, fields: dict[str, Any]) -> None:
        """Insert ``session_id`` unless present; the parent must exist only for a new row."""
        text_arg("session_id", session_id, non_empty=True)
        text_arg("source", source, non_empty=True)
        parent = fields.get("parent_session_id")
        started_at = self._clock()
        with self._store.write() as uow:
            if uow.sessions.exists(session_id):
                return
            if parent is not None and not uow.sessions.exists(parent):
                raise InvalidInputError(f"parent_session_id {parent!r} names no session")
            uow.sessions.add_if_absent(session_id, source, started_at, **fields)

    @retrying
    def end_session(self, session_id: str, end_reason: str | None) -> None:
        """Mark a session ended; one already ended keeps its first time and reason.

        So a compression split stays ``end_reason = 'compression'`` whatever a
        stale caller says later; :meth:`reopen_session` first to end it again
        with another reason. An unknown id is SessionNotFoundError.
        """
        text_arg("end_reason", end_reason, optional=True)
        self._write_to(
            session_id, lambda uow: uow.sessions.end(session_id, self._clock(), end_reason)
        )

    @retrying
    def reopen_session(self, session_id: str) -> None:
        """Clear ``ended_at``/``end_reason`` so a resumed session counts as active."""
        self._write_to(session_id, lambda uow: uow.sessions.reopen(session_id))

    @retrying
    def update_system_prompt(self, session_id: str, system_prompt: str | None) -> None:
        text_arg("system_prompt", system_prompt, optional=True)
        self._write_to(
            session_id, lambda uow: uow.sessions.set_system_prompt(session_id, system_prompt)
        )

    @retrying
    def update_token_counts(
        self,
        session_id: str,
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
        """Add to the token and cost counters, or set them with ``absolute=True``.

        As the old class: ``model`` and the route (``billing_provider``,
        ``billing_base_url``, ``billing_mode``) fill in a session that had
        none and are kept after that; the cost labels (status, source,
        pricing version) replace the stored ones when given. An
        ``estimated_cost_usd`` of None counts as 0 (so a session with
        recorded usage always has a number there); an ``actual_cost_usd`` of
        None keeps the stored value. Returns None; an unknown session is
        SessionNotFoundError.
        """
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
        self._write_to(
            session_id, lambda uow: uow.sessions.record_usage(session_id, usage, absolute=absolute)
        )

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            return uow.sessions.get(session_id)

    def resolve_session_id(self, session_id_or_prefix: str) -> str | None:
        """The full id an exact id or an unambiguous prefix names; None otherwise.

        For ids typed by people (``--resume 20260412_15``): the exact id if it
        exists, else the single session whose id starts with the prefix; None
        when no session or more than one does. ``%``, ``_`` and ``\\`` in
        the prefix are literal characters; the match is case-sensitive.
        """
        text_arg("session_id_or_prefix", session_id_or_prefix)
        with self._store.read() as uow:
            return uow.sessions.resolve_id(session_id_or_prefix)

    # ------------------------------------------------------------------
    # Titles
    # ------------------------------------------------------------------
    @staticmethod
    def sanitize_title(title: str | None) -> str | None:
        return clean_title(title)

    @retrying
    def set_session_title(self, session_id: str, title: str | None) -> bool:
        """Set (or, with an empty title, clear) a title; False if the session is unknown.

        True when the session exists (even if its title was already this
        one). As in the old class, a title another session holds is a
        TitleConflictError and a title the cleaning rules refuse (too long, not
        text) an InvalidInputError -- both ValueError, raised before the
        session is looked up, so an unknown session with a bad title raises.
        """
        text_arg("session_id", session_id)
        cleaned = clean_title(title)
        with self._store.write() as uow:
            if cleaned is not None:
                owner = uow.sessions.title_owner(cleaned, excluding=session_id)
                if owner is not None:
                    raise TitleConflictError(
                        f"title {cleaned!r} is already in use by session {owner}"
                    )
            try:
                found = uow.sessions.set_title(session_id, cleaned)
            except IntegrityError as error:  # lost a race with another writer
                raise TitleConflictError(f"title {cleaned!r} is already in use") from error
        return found

    def get_session_title(self, session_id: str) -> str | None:
        session = self.get_session(session_id)
        return session["title"] if session else None

    def get_session_by_title(self, title: str) -> dict[str, Any] | None:
        text_arg("title", title)
        with self._store.read() as uow:
            return uow.sessions.get_by_title(title)

    def resolve_session_by_title(self, title: str) -> str | None:
        """The newest session of the lineage: "T #3" beats "T #2" beats "T"."""
        text_arg("title", title)
        with self._store.read() as uow:
            family = uow.sessions.title_family(title)
        ranked = [
            (number, row["started_at"], row["id"])
            for row in family
            if (number := lineage_number(row["title"], title)) is not None
        ]
        return max(ranked)[2] if ranked else None

    def get_next_title_in_lineage(self, base_title: str) -> str:
        """ "Fix Docker Build" -> "Fix Docker Build #2" (or the next free number)."""
        text_arg("base_title", base_title)
        base = lineage_base(base_title)
        with self._store.read() as uow:
            family = uow.sessions.title_family(base)
        return next_in_lineage(base, (row["title"] for row in family))

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------
    @retrying
    def append_message(
        self,
        session_id: str,
        role: str,
        content: str | None = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        reasoning: str | None = None,
        reasoning_details: Any = None,
        codex_reasoning_items: Any = None,
    ) -> int:
        """Append one message and bump the session's counters; returns the message id."""
        text_arg("session_id", session_id)
        row = self._message_row(session_id, locals())
        calls = _tool_call_total(tool_calls)
        with self._store.write() as uow:
            if not uow.sessions.bump_counters(session_id, 1, calls):
                raise SessionNotFoundError(session_id)
            return uow.messages.add(row)

    @retrying
    def append_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append a whole turn in one transaction: every message and its counters, or none.

        Each item takes the keyword arguments of :meth:`append_message`.
        """
        if type(messages) is not list and (
            isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence)
        ):
            raise InvalidInputError(
                f"messages must be a list of dicts, got {type(messages).__name__}"
            )
        text_arg("session_id", session_id)
        rows = []
        calls = 0
        for index, message in enumerate(messages):
            # type() first: the ABC check costs more than a turn's other checks together.
            if type(message) is not dict and not isinstance(message, Mapping):
                raise InvalidInputError(
                    f"messages[{index}] must be a dict, got {type(message).__name__}"
                )
            if not _APPEND_ARGUMENTS.issuperset(message):
                unknown = sorted(map(repr, message.keys() - _APPEND_ARGUMENTS))
                raise InvalidInputError(
                    f"messages[{index}] has unknown fields: {', '.join(unknown)}"
                )
            if "role" not in message:
                raise InvalidInputError(f"messages[{index}] has no role")
            rows.append(self._message_row(session_id, message, index))
            calls += _tool_call_total(message.get("tool_calls"))
        if not rows:
            if self.get_session(session_id) is None:
                raise SessionNotFoundError(session_id)
            return []
        with self._store.write() as uow:
            if not uow.sessions.bump_counters(session_id, len(rows), calls):
                raise SessionNotFoundError(session_id)
            return uow.messages.add_many(rows)

    def get_messages(self, session_id: str) -> list[dict[str, Any]]:
        """Every message of the session in order, JSON fields decoded."""
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            rows = uow.messages.for_session(session_id)
        return [_decoded(row) for row in rows]

    def get_messages_as_conversation(self, session_id: str) -> list[dict[str, Any]]:
        """The session as OpenAI-format messages, for replaying it to a model."""
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            rows = uow.messages.conversation_rows(session_id)
        conversation = []
        for row in rows:
            message: dict[str, Any] = {"role": row["role"], "content": row["content"]}
            if row["tool_call_id"]:
                message["tool_call_id"] = row["tool_call_id"]
            if row["tool_name"]:
                message["tool_name"] = row["tool_name"]
            if row["tool_calls"]:
                message["tool_calls"] = decode_json(row["tool_calls"])
            if row["role"] == "assistant":
                if row["reasoning"]:
                    message["reasoning"] = row["reasoning"]
                for field in ("reasoning_details", "codex_reasoning_items"):
                    if row[field]:
                        message[field] = decode_json(row[field])
            conversation.append(message)
        return conversation

    @retrying
    def clear_messages(self, session_id: str) -> None:
        """Delete a session's messages but keep the session, counters back to zero."""

        def clear(uow: UnitOfWork) -> bool:
            found = uow.sessions.set_counters(session_id, 0, 0)
            if found:
                uow.messages.delete_for_session(session_id)
            return found

        self._write_to(session_id, clear)

    def message_count(self, session_id: str | None = None) -> int:
        text_arg("session_id", session_id, optional=True)
        with self._store.read() as uow:
            return uow.messages.count(session_id)

    # ------------------------------------------------------------------
    # Search
    # ------------------------------------------------------------------
    @staticmethod
    def _sanitize_fts5_query(query: str) -> str:
        return sanitize_fts5_query(query)

    def search_messages(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        exclude_sources: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Full-text search; each hit has a ``>>>snippet<<<`` and its neighbours as context.

        A query the sanitizer cannot rescue, or one the engine still rejects,
        finds nothing rather than raising: search input comes straight from
        people (see :func:`~hermes_store.repositories.search.rejected_query`).
        A database that fails while searching raises, as anywhere else.
        ``source_filter=[]`` allows no source and finds nothing, as in the old
        class; an empty ``exclude_sources`` or ``role_filter`` is no filter.
        """
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        filters = {
            "sources": names_arg("source_filter", source_filter),
            "excluded_sources": names_arg("exclude_sources", exclude_sources),
            "roles": names_arg("role_filter", role_filter),
            "limit": int_arg("limit", limit, minimum=0),
            "offset": int_arg("offset", offset, minimum=0),
        }
        items = query_items(query)
        # An empty source_filter allows no source (the old class's ``IN ()``); empty
        # exclude_sources and role_filter filter nothing, as there.
        if not items or filters["limit"] == 0 or filters["sources"] == []:
            return []
        with self._store.read() as uow:
            try:
                matches = self._ranked_matches(uow, query, items, filters)
            except (OperationalError, ProgrammingError) as error:
                if not rejected_query(error):
                    raise  # the database failed: that is no "no matches"
                return []
            for match in matches:
                match["context"] = uow.search.context(match["session_id"], match["id"])
        return matches

    def _ranked_matches(
        self, uow: UnitOfWork, query: str, items: list[str], filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Word matches first (unicode61 / tsvector), then substring matches.

        A CJK query goes to the substring route only. Any other query asks the
        word index first; when that cannot fill the page, substring matches of
        terms of three or more characters follow, which finds Latin words glued
        into CJK text (``修改youer服务端``). Short Latin terms never scan: "x"
        as a substring would match nearly everything.
        """
        if has_cjk(query) or not uow.search.has_word_index:
            return self._substring_matches(uow, items, filters, allow_scan=True)
        limit, offset = filters["limit"], filters["offset"]
        end = min(offset + limit, INT64_MAX)  # a LIMIT is 64-bit, so is the page's end
        window = {**filters, "limit": end, "offset": 0}
        words = uow.search.match(uow.search.word_query(items), **window)
        if len(words) == end:
            return words[offset:]
        seen = {match["id"] for match in words}
        substrings = self._substring_matches(uow, items, window, allow_scan=False)
        merged = words + [match for match in substrings if match["id"] not in seen]
        return merged[offset : offset + limit]

    @staticmethod
    def _substring_matches(
        uow: UnitOfWork, items: list[str], filters: dict[str, Any], *, allow_scan: bool
    ) -> list[dict[str, Any]]:
        """Substring matches: FTS5 trigram or LIKE on SQLite, ILIKE on PostgreSQL.

        ``allow_scan=False`` keeps to what an index answers: terms of three or
        more characters (the trigram table; pg_trgm for ILIKE on PostgreSQL).
        """
        search = uow.search
        postgresql = search.postgresql
        # The agent's v23+ trigram table leaves tool rows out; a search of tool
        # rows alone scans instead, as the agent's own code does.
        trigram = search.has_trigram and not (
            search.trigram_skips_tool_rows and "tool" in (filters["roles"] or ())
        )
        substring = (
            substring_query(items, trigram=False, like="ILIKE")
            if postgresql
            else substring_query(items, trigram=trigram)
        )
        if substring is None:
            return []
        if substring.fts is not None:
            return search.match(substring.fts, index=TRIGRAM_INDEX, **filters)
        indexed = postgresql and min(map(len, substring.needles)) >= TRIGRAM
        if not (allow_scan or indexed):
            return []
        matches = uow.search.match(
            None,
            index=None,
            like_sql=substring.like_sql,
            like_params=substring.like_params,
            **filters,
        )
        for match in matches:
            match["snippet"] = make_snippet(match["snippet"], substring.needles)
        return matches

    # ------------------------------------------------------------------
    # Listing, lineage, usage
    # ------------------------------------------------------------------
    def search_sessions(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Sessions newest first, optionally of one source."""
        params = self._page(source, limit, offset)
        with self._store.read() as uow:
            return uow.sessions.list(*params)

    def list_sessions_rich(
        self,
        source: str | None = None,
        exclude_sources: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        project_compression_tips: bool = True,
    ) -> list[dict[str, Any]]:
        """Sessions newest first, one entry per conversation, with ``preview`` and ``last_active``.

        As the old class lists them: child sessions (subagents, branches,
        continuations) are hidden unless ``include_children``; a
        conversation that compression split is listed once, under its newest
        continuation -- that session's id, title, counters, preview and
        activity, the first session's ``started_at`` and place in the order,
        and ``_lineage_root_id`` naming the first session. Pass
        ``project_compression_tips=False`` for the raw root rows. ``preview``
        is the first user message on one line, 60 characters and ``...``
        when longer. Each row also has every column of ``sessions``.
        """
        source, limit, offset = self._page(source, limit, offset)
        excluded = names_arg("exclude_sources", exclude_sources) or []
        options = {
            name: _bool_arg(name, value)
            for name, value in (
                ("include_children", include_children),
                ("project_compression_tips", project_compression_tips),
            )
        }
        with self._store.read() as uow:
            return uow.sessions.listing(
                source=source, exclude_sources=excluded, limit=limit, offset=offset, **options
            )

    def get_compression_tip(self, session_id: str) -> str:
        """The id of the newest continuation of a compressed conversation, else ``session_id``.

        Follows children whose parent ended with ``end_reason =
        'compression'`` and that started at or after the parent's end
        (subagents and branches start while the parent is live, so they are
        not continuations), newest first, to the last one. An id that is in
        no such chain, or names no session, is returned as it is.
        """
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            return uow.sessions.compression_tip(session_id)

    def session_count(self, source: str | None = None) -> int:
        text_arg("source", source, optional=True)
        with self._store.read() as uow:
            return uow.sessions.count(source)

    def get_ancestors(self, session_id: str) -> list[dict[str, Any]]:
        """The session, then its parent, grandparent, ...: ``id, title, started_at, parent``."""
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            return uow.sessions.ancestors(session_id)

    def get_descendants(self, session_id: str) -> list[dict[str, Any]]:
        """The session and every session split off it, transitively."""
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            return uow.sessions.descendants(session_id)

    def token_usage_by_model(self) -> list[dict[str, Any]]:
        with self._store.read() as uow:
            return uow.sessions.token_totals_by_model()

    def top_sessions_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        int_arg("limit", limit, minimum=0)
        with self._store.read() as uow:
            return uow.sessions.top_by_tokens(limit)

    # ------------------------------------------------------------------
    # Export and cleanup
    # ------------------------------------------------------------------
    def export_session(self, session_id: str) -> dict[str, Any] | None:
        """A session and all its messages as one dict (None if unknown)."""
        text_arg("session_id", session_id)
        with self._store.read() as uow:
            session = uow.sessions.get(session_id)
            if session is None:
                return None
            messages = uow.messages.for_session(session_id)
        return {**session, "messages": [_decoded(m) for m in messages]}

    def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        """Every session (optionally of one source) with its messages, from one snapshot."""
        return list(self.iter_export(source))

    def iter_export(self, source: str | None = None) -> Iterator[dict[str, Any]]:
        """Like :meth:`export_all`, one session at a time, for files larger than memory."""
        text_arg("source", source, optional=True)  # checked now, not at the first next()
        return self._export_rows(source)

    def _export_rows(self, source: str | None) -> Iterator[dict[str, Any]]:
        with self._store.read() as uow:
            for session in uow.sessions.all(source):
                messages = uow.messages.for_session(session["id"])
                yield {**session, "messages": [_decoded(m) for m in messages]}

    @retrying
    def prune_sessions(self, older_than_days: float = 90, source: str | None = None) -> int:
        """Delete ended sessions older than N days; their children are orphaned, not deleted."""
        days = number_arg("older_than_days", older_than_days, minimum=0.0)
        text_arg("source", source, optional=True)
        cutoff = self._clock() - days * SECONDS_PER_DAY
        with self._store.write() as uow:
            return len(uow.sessions.prune(cutoff, source))

    @retrying
    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its messages; True if it existed. Children become roots."""
        text_arg("session_id", session_id)
        with self._store.write() as uow:
            return uow.sessions.delete(session_id)

    # ------------------------------------------------------------------
    # plumbing
    # ------------------------------------------------------------------
    def _write_to(self, session_id: str, change: Callable[[UnitOfWork], bool]) -> None:
        """Run ``change`` in a write unit; a False result means the session is unknown."""
        text_arg("session_id", session_id)
        with self._store.write() as uow:
            if not change(uow):
                raise SessionNotFoundError(session_id)

    def _message_row(
        self, session_id: str, fields: Mapping[str, Any], index: int | None = None
    ) -> dict[str, Any]:
        """The checked ``messages`` row for an append, before any transaction starts.

        ``session_id`` is the caller's, already checked once per call. This
        runs for every message the agent writes, so the common values -- None,
        ASCII text, a plain int -- pass without a call; anything else gets the
        full check of :mod:`~hermes_store.domain.arguments` and its error, which names
        the field (``messages[3].content`` for the fourth message of a turn).
        """
        get = fields.get
        role = get("role")
        if type(role) is not str or not role.isascii() or not role.strip():
            role = text_arg(_field_name(index, "role"), role, non_empty=True)
        token_count = get("token_count")
        plain_count = type(token_count) is int and 0 <= token_count <= INT64_MAX
        if token_count is not None and not plain_count:
            token_count = int_arg(_field_name(index, "token_count"), token_count, minimum=0)
        row: dict[str, Any] = {
            "session_id": session_id,
            "role": role,
            "timestamp": self._clock(),
            "token_count": token_count,
        }
        for name in _OPTIONAL_TEXT_FIELDS:
            value = get(name)
            if value is not None and not (type(value) is str and value.isascii()):
                value = text_arg(_field_name(index, name), value)
            row[name] = value
        for name in JSON_MESSAGE_FIELDS:
            value = get(name)
            row[name] = json_arg(_field_name(index, name), value) if value else None
        return row

    @staticmethod
    def _page(source: str | None, limit: int, offset: int) -> tuple[str | None, int, int]:
        return (
            text_arg("source", source, optional=True),
            int_arg("limit", limit, minimum=0),
            int_arg("offset", offset, minimum=0),
        )


def _bool_arg(name: str, value: Any) -> bool:
    """A flag must be a bool: "no" or 0 meaning True by truthiness would be a silent surprise."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def _field_name(index: int | None, name: str) -> str:
    """How an error names a field: ``content``, or ``messages[3].content`` inside a turn."""
    return name if index is None else f"messages[{index}].{name}"


_APPEND_ARGUMENTS = frozenset(
    {
        "role",
        "content",
        "tool_name",
        "tool_calls",
        "tool_call_id",
        "token_count",
        "finish_reason",
        "reasoning",
        "reasoning_details",
        "codex_reasoning_items",
    }
)
