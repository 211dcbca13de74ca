"""``SessionDB``: the documented API of the old ``hermes_state.SessionDB``, drop-in.

A thin adapter, holding no rule of its own: every method is one unit of work
on the injected (or self-made) store, asking the repositories (which check
the arguments, keep the counters, titles and lineage, and raise the store's
errors) and giving back the shapes the old class returns -- plain dicts,
JSON fields decoded on read -- so agent code does not change. A write runs
through :meth:`~hermes_store.uow.store.Store.transact`, so it either happens
completely or not at all, and on PostgreSQL is run again when the server
aborted it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.read_route import DEFAULT_MAX_LAG_S
from hermes_store.domain.arguments import text_arg
from hermes_store.domain.keeping import EMPTY_GRACE_SECONDS
from hermes_store.domain.messages import JSON_FIELDS, MessageIn
from hermes_store.domain.records import SearchHit
from hermes_store.domain.search_options import fields_arg
from hermes_store.domain.titles import MAX_TITLE_LENGTH, clean_title
from hermes_store.domain.usage import UsageReport
from hermes_store.errors import InvalidInputError, StoreAccessError
from hermes_store.uow import upkeep
from hermes_store.uow.appends import append_work
from hermes_store.uow.pruning import prune_in_batches
from hermes_store.uow.store import Store

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

JSON_MESSAGE_FIELDS = JSON_FIELDS


def _in_order(row: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``row`` with its keys in the table's column ``order`` (the old class's ``SELECT *``
    export), any key the table lacks after them."""
    ordered = {name: row[name] for name in order if name in row}
    return ordered | row if len(ordered) < len(row) else ordered


class SessionDB:
    """Session storage with FTS5 search, on SQLite by default.

    ``durability="normal"`` trades the last commits before a power loss for
    faster writes (see :mod:`hermes_store.backends.durability`); the default keeps
    every returned write on the disk, as the old store did. ``read_only=True``
    opens the file for reading only (see :class:`~hermes_store.uow.store.Store`):
    every write method then raises :class:`~hermes_store.errors.ReadOnlyStoreError`.
    ``clock`` says what "now" is for the times written (a test's clock).
    ``shared_commits=True`` lets this process's concurrent writers share
    commits (see :mod:`hermes_store.uow.group`). ``read_url`` and
    ``max_replica_lag`` send the reading methods to a PostgreSQL replica, as
    :class:`~hermes_store.uow.store.Store` describes.
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
        clock: Callable[[], float] | None = None,
        shared_commits: bool | None = None,
        read_url: str | os.PathLike[str] | URL | None = None,
        max_replica_lag: float | None = None,
    ) -> None:
        if store is not None and db_path is not None:
            raise InvalidInputError("pass either db_path or store, not both")
        if store is not None and (
            policy is not None
            or durability is not None
            or read_only is not None
            or clock is not None
            or shared_commits is not None
            or read_url is not None
            or max_replica_lag is not None
        ):
            # Silently ignoring them would run a store on settings the caller did not ask for.
            raise InvalidInputError(
                "policy, durability, read_only and clock are the store's (so are shared_commits, "
                "read_url and max_replica_lag): pass them to Store(), not with store="
            )
        try:
            self._store = store or Store(
                db_path,
                policy=policy,
                durability=Durability.FULL if durability is None else durability,
                read_only=False if read_only is None else read_only,
                clock=time.time if clock is None else clock,
                shared_commits=bool(shared_commits),
                read_url=read_url,
                max_replica_lag=DEFAULT_MAX_LAG_S if max_replica_lag is None else max_replica_lag,
            )
        except StoreAccessError as error:
            if read_only:
                raise
            # A writable open needs to write (tighten, migrate, the WAL's files) even
            # before any call; a caller who only reads has a way in that writes nothing.
            raise StoreAccessError(
                f"{error}; to only read it, open it with SessionDB(path, read_only=True)"
            ) from error
        self._owns_store = store is None
        self.db_path = self._store.path

    @property
    def store(self) -> Store:
        """The store this object runs its units of work on."""
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

        The first write wins (see :meth:`SessionRepository.create
        <hermes_store.repositories.sessions.SessionRepository.create>`): a
        second call with the same id changes nothing; a ``parent_session_id``
        naming no session is InvalidInputError.
        """
        self._store.transact(
            lambda uow: uow.sessions.create(
                session_id,
                source,
                model=model,
                model_config=model_config,
                system_prompt=system_prompt,
                user_id=user_id,
                parent_session_id=parent_session_id,
            )
        )
        return session_id

    def ensure_session(
        self, session_id: str, source: str = "unknown", model: str | None = None
    ) -> None:
        """Make sure a session row exists: a minimal one if absent, else nothing changes."""
        self._store.transact(lambda uow: uow.sessions.ensure(session_id, source, model))

    def end_session(self, session_id: str, end_reason: str | None) -> None:
        """Mark a session ended; one already ended keeps its first time and reason.

        :meth:`reopen_session` first to end it again with another reason. An
        unknown id is SessionNotFoundError.
        """
        self._store.transact(lambda uow: uow.sessions.end(session_id, end_reason))

    def reopen_session(self, session_id: str) -> None:
        """Clear ``ended_at``/``end_reason`` so a resumed session counts as active."""
        self._store.transact(lambda uow: uow.sessions.reopen(session_id))

    def update_system_prompt(self, session_id: str, system_prompt: str | None) -> None:
        """Replace the session's system prompt snapshot (None clears it)."""
        self._store.transact(lambda uow: uow.sessions.set_system_prompt(session_id, system_prompt))

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

        The old class's rules (see :meth:`SessionRepository.record_usage
        <hermes_store.repositories.sessions.SessionRepository.record_usage>`):
        ``model`` and the billing route are filled in once and kept, the cost
        labels follow the latest report, a missing estimated cost counts 0.
        Returns None; an unknown session is SessionNotFoundError.
        """
        usage = UsageReport(
            input_tokens,
            output_tokens,
            model,
            cache_read_tokens,
            cache_write_tokens,
            reasoning_tokens,
            estimated_cost_usd,
            actual_cost_usd,
            cost_status,
            cost_source,
            pricing_version,
            billing_provider,
            billing_base_url,
            billing_mode,
        )
        self.record_usage(session_id, usage, absolute=absolute)

    def record_usage(self, session_id: str, usage: UsageReport, *, absolute: bool = False) -> None:
        """:meth:`update_token_counts` for a report already built as a :class:`UsageReport`."""
        self._store.transact(
            lambda uow: uow.sessions.record_usage(session_id, usage, absolute=absolute)
        )

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """The session's row as a dict (every documented column, and the agent's
        ``archived``/``pinned`` where the file has them), or None."""
        with self._store.read() as uow:
            found = uow.sessions.get(session_id)
            if found is None:
                return None
            return found.as_dict() | uow.keeping.flags(session_id)

    def resolve_session_id(self, session_id_or_prefix: str) -> str | None:
        """The full id an exact id or an unambiguous prefix names; None otherwise.

        For ids typed by people (``--resume 20260412_15``): the exact id if it
        exists, else the single session whose id starts with the prefix; None
        when no session or more than one does. ``%``, ``_`` and ``\\`` in
        the prefix are literal characters; the match is case-sensitive.
        """
        with self._store.read() as uow:
            return uow.sessions.resolve_id(session_id_or_prefix)

    # ------------------------------------------------------------------
    # Titles
    # ------------------------------------------------------------------
    @staticmethod
    def sanitize_title(title: str | None) -> str | None:
        """The title as it would be stored: control characters out, spaces folded, or None."""
        return clean_title(title)

    def set_session_title(self, session_id: str, title: str | None) -> bool:
        """Set (or, with an empty title, clear) a title; False if the session is unknown.

        A title another session holds is TitleConflictError, one the cleaning
        rules refuse InvalidInputError -- both ValueError, as in the old class.
        """
        return self._store.transact(lambda uow: uow.sessions.set_title(session_id, title))

    def get_session_title(self, session_id: str) -> str | None:
        """The session's title, or None (no title, or no such session)."""
        session = self.get_session(session_id)
        return session["title"] if session else None

    def get_session_by_title(self, title: str) -> dict[str, Any] | None:
        """The session holding exactly this title, as a dict, or None."""
        with self._store.read() as uow:
            found = uow.sessions.by_title(title)
            if found is None:
                return None
            return found.as_dict() | uow.keeping.flags(found.id)

    def resolve_session_by_title(self, title: str) -> str | None:
        """The newest session of the lineage: "T #3" beats "T #2" beats "T"."""
        with self._store.read() as uow:
            return uow.sessions.resolve_by_title(title)

    def get_next_title_in_lineage(self, base_title: str) -> str:
        """ "Fix Docker Build" -> "Fix Docker Build #2" (or the next free number)."""
        with self._store.read() as uow:
            return uow.sessions.next_title_in_lineage(base_title)

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------
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
        """Append one message and bump the session's counters; returns the message id.

        With shared commits and other writers about, the message is checked
        here, on the caller's thread, and the group writes it together with
        the other callers' appends (:meth:`MessageRepository.append_checked
        <hermes_store.repositories.messages.MessageRepository.append_checked>`).
        """
        fields = {
            "role": role,
            "content": content,
            "tool_name": tool_name,
            "tool_calls": tool_calls,
            "tool_call_id": tool_call_id,
            "token_count": token_count,
            "finish_reason": finish_reason,
            "reasoning": reasoning,
            "reasoning_details": reasoning_details,
            "codex_reasoning_items": codex_reasoning_items,
        }
        shared = self._store.shared
        if shared is not None and shared.has_company:
            return self._store.transact(append_work(session_id, MessageIn(**fields)))
        # The common case: the fields go straight to the repository's checks, as
        # the mapping ``MessageIn.fields`` would give, without building the record.
        return self._store.transact(lambda uow: uow.messages.append_fields(session_id, fields))

    def append(self, session_id: str, message: MessageIn) -> int:
        """:meth:`append_message` for a message already built as a :class:`MessageIn`."""
        shared = self._store.shared
        if shared is not None and shared.has_company:
            return self._store.transact(append_work(session_id, message))
        return self._store.transact(lambda uow: uow.messages.append(session_id, message))

    def append_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append a whole turn in one transaction: every message and its counters, or none.

        Each item takes the keyword arguments of :meth:`append_message`; the
        ids come back in order.
        """
        return self._store.transact(lambda uow: uow.messages.append_many(session_id, messages))

    def get_messages(
        self, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[dict[str, Any]]:
        """The session's messages in order, JSON fields decoded; a page with ``limit``/``offset``.

        ``limit=None`` reads every message from ``offset`` on; the order
        (timestamp, then id) is the same with or without a page.
        """
        if limit is None and offset == 0:
            with self._store.read() as uow:
                return uow.messages.for_session_as_dicts(session_id)
        from hermes_store.repositories import paging

        with self._store.read() as uow:
            return paging.page(uow.connection, uow.layout, session_id, limit, offset)

    def get_messages_around(
        self, message_id: int, before: int = 5, after: int = 5
    ) -> list[dict[str, Any]]:
        """A search hit in its surroundings: up to ``before`` and ``after`` messages of its session.

        In conversation order, the message itself included; an id naming no
        message gives an empty list.
        """
        from hermes_store.repositories import paging

        with self._store.read() as uow:
            return paging.around(uow.connection, uow.layout, message_id, before, after)

    def get_messages_as_conversation(self, session_id: str) -> list[dict[str, Any]]:
        """The session as OpenAI-format messages, for replaying it to a model.

        Each has ``role`` and ``content``; ``tool_call_id``, ``tool_name`` and
        ``tool_calls`` (decoded) where present; ``reasoning``,
        ``reasoning_details`` and ``codex_reasoning_items`` on assistant turns
        that have them.
        """
        with self._store.read() as uow:
            return uow.messages.conversation(session_id)

    def clear_messages(self, session_id: str) -> None:
        """Delete a session's messages but keep the session, counters back to zero."""
        self._store.transact(lambda uow: uow.messages.clear(session_id))

    def message_count(self, session_id: str | None = None) -> int:
        """How many messages the session (or, with no id, the whole store) holds."""
        with self._store.read() as uow:
            return uow.messages.count(session_id)

    # ------------------------------------------------------------------
    # Search
    # ------------------------------------------------------------------
    def search_messages(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        exclude_sources: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        sort: str = "relevance",
        fields: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Full-text search; each hit has a ``>>>snippet<<<`` and its neighbours as context.

        A query the sanitizer cannot rescue, or one the engine still rejects,
        finds nothing rather than raising: search input comes straight from
        people. A database that fails while searching raises, as anywhere
        else. ``source_filter=[]`` allows no source and finds nothing, as in
        the old class; an empty ``exclude_sources`` or ``role_filter`` is no
        filter. Each hit: ``id, session_id, role, snippet, timestamp,
        tool_name, source, model, session_started, context``; ``context`` is
        the previous message, the match and the next one, each ``{role,
        content}`` cut to 200 characters. ``sort="newest"`` or ``"oldest"``
        orders the best 1,000 matches by time; ``fields`` returns only those
        keys of each hit (without ``"context"`` its reads are skipped); a
        very long query is cut, not refused.
        """
        wanted = fields_arg(fields)
        with self._store.read() as uow:
            hits = uow.search.search(
                query,
                source_filter=source_filter,
                exclude_sources=exclude_sources,
                role_filter=role_filter,
                limit=limit,
                offset=offset,
                sort=sort,
                with_context=wanted is None or "context" in wanted,
            )
        if wanted is None:
            return [hit.as_dict() for hit in hits]
        return [{name: row[name] for name in wanted} for row in map(SearchHit.as_dict, hits)]

    # ------------------------------------------------------------------
    # Listing, lineage, usage
    # ------------------------------------------------------------------
    def search_sessions(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Sessions newest first, optionally of one source (children included).

        Each as :meth:`get_session` gives it (the flags too, where the file has them).
        """
        with self._store.read() as uow:
            found = uow.sessions.page(source, limit, offset)
            flags = uow.keeping.flags_of([session.id for session in found])
        return [session.as_dict() | flags.get(session.id, {}) for session in found]

    def list_sessions_rich(
        self,
        source: str | None = None,
        exclude_sources: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        project_compression_tips: bool = True,
        include_archived: bool = False,
        include_pinned: bool = False,
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
        Archived sessions are hidden unless ``include_archived``;
        ``include_pinned`` adds to the first page (``offset=0``) the pinned
        sessions it does not hold, after its ``limit`` rows.
        """
        with self._store.read() as uow:
            return uow.sessions.listing(
                source=source,
                exclude_sources=exclude_sources,
                limit=limit,
                offset=offset,
                include_children=include_children,
                project_compression_tips=project_compression_tips,
                include_archived=include_archived,
                include_pinned=include_pinned,
            )

    def get_compression_tip(self, session_id: str) -> str:
        """The id of the newest continuation of a compressed conversation, else ``session_id``.

        Follows children whose parent ended with ``end_reason =
        'compression'`` and that started at or after the parent's end
        (subagents and branches start while the parent is live, so they are
        not continuations), newest first, to the last one. An id that is in
        no such chain, or names no session, is returned as it is.
        """
        with self._store.read() as uow:
            return uow.sessions.compression_tip(session_id)

    def session_count(self, source: str | None = None, include_archived: bool = False) -> int:
        """How many sessions the store holds (of one source, or all); archived ones if asked."""
        with self._store.read() as uow:
            return uow.sessions.count(source, include_archived)

    def session_count_ge(
        self, n: int, source: str | None = None, include_archived: bool = False
    ) -> bool:
        """Whether the store holds at least ``n`` sessions; reads no more than ``n`` entries."""
        with self._store.read() as uow:
            return uow.sessions.count_at_least(n, source, include_archived)

    def search_sessions_by_id(
        self, query: str, limit: int = 20, include_archived: bool = True
    ) -> list[dict[str, Any]]:
        """Sessions by what a person typed of their id: exact, then prefix, then substring.

        Newest first within each kind; each a session dict as
        :meth:`get_session` gives. ``%``, ``_`` and ``\\`` are literal.
        """
        with self._store.read() as uow:
            ids = uow.keeping.search_by_id(query, limit, include_archived)
            found = [uow.sessions.get(session_id) for session_id in ids]
        return [session.as_dict() for session in found if session is not None]

    # ------------------------------------------------------------------
    # Archive and pin
    # ------------------------------------------------------------------
    def set_session_archived(self, session_id: str, archived: bool = True) -> bool:
        """Archive (hide from listings and counts) or restore a session and its compression chain.

        Nothing is deleted. True once done; an unknown id is
        SessionNotFoundError; a file without the flags (the agent's schema
        before 25) is SchemaError.
        """
        self._store.transact(lambda uow: uow.keeping.set_archived(session_id, archived))
        return True

    def set_session_pinned(self, session_id: str, pinned: bool = True) -> bool:
        """Pin (keep: listed with ``include_pinned``, spared by pruning and stale archiving)."""
        self._store.transact(lambda uow: uow.keeping.set_pinned(session_id, pinned))
        return True

    def archive_stale_sessions(self, idle_days: float, *, exclude_pinned: bool = True) -> int:
        """Archive every conversation idle ``idle_days`` or more; how many sessions changed."""
        return self._store.transact(
            lambda uow: uow.keeping.archive_stale(idle_days, exclude_pinned=exclude_pinned)
        )

    def get_ancestors(self, session_id: str) -> list[dict[str, Any]]:
        """The session, then its parent, grandparent, ...

        Each entry: ``id, title, started_at, parent_session_id``.
        """
        with self._store.read() as uow:
            return [entry.as_dict() for entry in uow.sessions.ancestors(session_id)]

    def get_descendants(self, session_id: str) -> list[dict[str, Any]]:
        """The session and every session split off it, transitively.

        Each entry: ``id, title, started_at, parent_session_id``.
        """
        with self._store.read() as uow:
            return [entry.as_dict() for entry in uow.sessions.descendants(session_id)]

    def token_usage_by_model(self) -> list[dict[str, Any]]:
        """Per model: ``model, session_count, total_input, total_output, total_cost``."""
        with self._store.read() as uow:
            return [usage.as_dict() for usage in uow.sessions.token_usage_by_model()]

    def top_sessions_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        """The sessions with most tokens: ``id, title, model, total_tokens, estimated_cost_usd``."""
        with self._store.read() as uow:
            return [entry.as_dict() for entry in uow.sessions.top_by_tokens(limit)]

    # ------------------------------------------------------------------
    # Export and cleanup
    # ------------------------------------------------------------------
    def export_session(self, session_id: str) -> dict[str, Any] | None:
        """A session and all its messages as one dict (None if unknown)."""
        with self._store.read() as uow:
            session = uow.sessions.get(session_id)
            if session is None:
                return None
            messages = uow.messages.for_session_as_dicts(session_id)
            order = uow.sessions.column_order()
            flags = uow.keeping.flags(session_id)
        return {**_in_order(session.as_dict() | flags, order), "messages": messages}

    def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        """Every session (optionally of one source) with its messages, from one snapshot."""
        return list(self.iter_export(source))

    def iter_export(self, source: str | None = None) -> Iterator[dict[str, Any]]:
        """Like :meth:`export_all`, one session at a time, for files larger than memory."""
        text_arg("source", source, optional=True)  # checked now, not at the first next()
        return self._export_rows(source)

    def _export_rows(self, source: str | None) -> Iterator[dict[str, Any]]:
        with self._store.read() as uow:
            order = uow.sessions.column_order()
            for session in uow.sessions.all(source):
                # dicts straight from the rows: see MessageRepository.for_session_as_dicts
                messages = uow.messages.for_session_as_dicts(session.id)
                flags = uow.keeping.flags(session.id)
                yield {**_in_order(session.as_dict() | flags, order), "messages": messages}

    def prune_sessions(self, older_than_days: float = 90, source: str | None = None) -> int:
        """Delete ended sessions older than N days; their children are orphaned, not deleted.

        In short write transactions (:mod:`hermes_store.uow.pruning`), so an
        agent appending meanwhile waits for one batch at most, not the whole
        prune; the count is of every session deleted.
        """
        return prune_in_batches(self._store, older_than_days, source)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its messages; True if it existed. Children become roots."""
        return self._store.transact(lambda uow: uow.sessions.delete(session_id))

    def delete_sessions(self, session_ids: Sequence[str]) -> int:
        """Delete many sessions in one transaction (all or none); how many existed."""
        return self._store.transact(lambda uow: uow.keeping.delete_sessions(session_ids))

    def count_empty_sessions(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """Sessions with no messages, older than ``grace_seconds``, not archived nor pinned.

        ``current_session_id``: the session in use, never counted.
        """
        with self._store.read() as uow:
            return uow.keeping.count_empty(grace_seconds, current_session_id)

    def delete_empty_sessions(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """Delete what :meth:`count_empty_sessions` counts, in one transaction; how many went."""
        return self._store.transact(
            lambda uow: uow.keeping.delete_empty(grace_seconds, current_session_id)
        )

    # ------------------------------------------------------------------
    # Store metadata and upkeep
    # ------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The value under ``key`` in ``state_meta`` (shared with the agent), or None."""
        with self._store.read() as uow:
            return uow.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` in ``state_meta``."""
        self._store.transact(lambda uow: uow.meta.set(key, value))

    def vacuum(self) -> None:
        """Give deleted rows' space back (SQLite VACUUM, PostgreSQL VACUUM ANALYZE).

        It holds the write lock while it runs: call it when the agent is idle.
        """
        upkeep.vacuum(self._store)

    def maybe_auto_prune_and_vacuum(
        self,
        retention_days: float = 90,
        min_interval_hours: float = 24,
        vacuum: bool = True,
        min_vacuum_interval_days: float = 30,
    ) -> dict[str, Any]:
        """Prune by age at most every ``min_interval_hours``; vacuum when due (see :mod:`.upkeep`).

        Returns ``{"skipped", "pruned", "vacuumed"}`` (and ``"error"`` when
        the vacuum failed: it is tried again at the next call).
        """
        return upkeep.maybe_auto_prune_and_vacuum(
            self._store, retention_days, min_interval_hours, vacuum, min_vacuum_interval_days
        )
