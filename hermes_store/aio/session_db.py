"""``AsyncSessionDB``: every method of :class:`~hermes_store.api.session_db.SessionDB`, awaited.

Each coroutine takes the same arguments as the method of the same name and
gives the same result or raises the same error, because it *is* that method,
run on a worker thread (:class:`~hermes_store.aio.offload.Offloader`): the
rules stay in one place, and the loop never waits for a lock, a flush or a
query. The methods are written out one by one (each a line delegating to
``_read`` or ``_write``) so that editors and type checkers see their
signatures; ``tests/contention/test_aio.py`` checks that none is missing or differs.

Writes naming a session are started in the order of their calls, one after
another per session (so its messages are stored in call order, even from
concurrent tasks); writes of different sessions run concurrently and, with
shared commits (the default here), share transactions and fsyncs.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from hermes_store.aio.offload import Offloader
from hermes_store.aio.shared import LoopWrites
from hermes_store.api.session_db import SessionDB
from hermes_store.backends.durability import Durability
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.domain.keeping import EMPTY_GRACE_SECONDS
from hermes_store.domain.messages import MessageIn
from hermes_store.domain.titles import MAX_TITLE_LENGTH, clean_title
from hermes_store.domain.usage import UsageReport
from hermes_store.errors import InvalidInputError
from hermes_store.uow import deadline as deadlines
from hermes_store.uow.appends import append_work
from hermes_store.uow.store import Store

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

_P = ParamSpec("_P")
_T = TypeVar("_T")
_END = object()


class AsyncSessionDB:
    """``SessionDB`` for asyncio programs: the same API, every method a coroutine.

    Made like a ``SessionDB`` (the same arguments, plus ``max_workers``, the
    size of its pool of worker threads), or around one: ``AsyncSessionDB(db=...)``.
    Opening reads (and on a new file creates) the database, which takes a
    moment: inside a running loop prefer ``await AsyncSessionDB.open(...)``,
    which does it on a thread. ``shared_commits`` is True by default here.
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
        db: SessionDB | None = None,
        max_workers: int = 8,
    ) -> None:
        if db is not None:
            if db_path is not None or store is not None:
                raise InvalidInputError("pass one of db_path, store or db, not several")
            self._db = db
        else:
            if store is None and shared_commits is None:
                shared_commits = True
            self._db = SessionDB(
                db_path,
                store=store,
                policy=policy,
                durability=durability,
                read_only=read_only,
                clock=clock,
                shared_commits=shared_commits,
                read_url=read_url,
                max_replica_lag=max_replica_lag,
            )
        self.db_path = self._db.db_path
        self._offload = Offloader(max_workers, what=f"AsyncSessionDB({str(self.db_path)!r})")
        shared = self._db.store.shared
        self._writes = None if shared is None else LoopWrites(shared, self._offload.pool)
        """Shared-commit writes queued from the loop (:mod:`hermes_store.aio.shared`)."""

    @classmethod
    async def open(
        cls, db_path: str | os.PathLike[str] | None = None, **options: Any
    ) -> AsyncSessionDB:
        """Open the database on a worker thread (the loop goes on meanwhile)."""
        return await asyncio.to_thread(cls, db_path, **options)

    @property
    def db(self) -> SessionDB:
        """The synchronous ``SessionDB`` underneath (for code running on threads)."""
        return self._db

    @property
    def store(self) -> Store:
        """The store this object runs its units of work on."""
        return self._db.store

    async def _read(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await self._offload.call(method, *args, **kwargs)

    def _deadline(self) -> float:
        """When a write made now has spent its patience (waiting for its turn included)."""
        return time.monotonic() + self._db.store.policy.patience_s

    async def _write(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """A write; one naming a session (its first argument) waits for that session's previous.

        Its patience counts from the call: the wait for its turn spends it too.
        """
        key = args[0] if args and isinstance(args[0], str) else kwargs.get("session_id")
        run = functools.partial(method, *args, **kwargs)
        if isinstance(key, str):
            return await self._offload.ordered(key, deadlines.within, self._deadline(), run)
        return await self._offload.call(deadlines.within, self._deadline(), run)

    async def close(self) -> None:
        """Answer every call, stop the workers, release the connections (as ``close``).

        Calls made before it run to their end (a write still waiting for its
        session's turn included) and are answered as usual; a call made once it
        has begun raises ``StoreClosedError`` and never runs. Then the file is
        free for another store at once.
        """
        drain = None if self._writes is None else self._writes.drain
        await self._offload.close(drain)
        await asyncio.to_thread(self._db.close)

    async def __aenter__(self) -> AsyncSessionDB:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # Session lifecycle ------------------------------------------------
    async def create_session(
        self,
        session_id: str,
        source: str,
        model: str | None = None,
        model_config: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
        user_id: str | None = None,
        parent_session_id: str | None = None,
    ) -> str:
        """See :meth:`SessionDB.create_session`."""
        return await self._write(
            self._db.create_session,
            session_id,
            source,
            model,
            model_config,
            system_prompt,
            user_id,
            parent_session_id,
        )

    async def ensure_session(
        self, session_id: str, source: str = "unknown", model: str | None = None
    ) -> None:
        """See :meth:`SessionDB.ensure_session`."""
        await self._write(self._db.ensure_session, session_id, source, model)

    async def end_session(self, session_id: str, end_reason: str | None) -> None:
        """See :meth:`SessionDB.end_session`."""
        await self._write(self._db.end_session, session_id, end_reason)

    async def reopen_session(self, session_id: str) -> None:
        """See :meth:`SessionDB.reopen_session`."""
        await self._write(self._db.reopen_session, session_id)

    async def update_system_prompt(self, session_id: str, system_prompt: str | None) -> None:
        """See :meth:`SessionDB.update_system_prompt`."""
        await self._write(self._db.update_system_prompt, session_id, system_prompt)

    async def update_token_counts(
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
        """See :meth:`SessionDB.update_token_counts`."""
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
        await self.record_usage(session_id, usage, absolute=absolute)

    async def record_usage(
        self, session_id: str, usage: UsageReport, *, absolute: bool = False
    ) -> None:
        """See :meth:`SessionDB.record_usage`."""
        await self._write(
            functools.partial(self._db.record_usage, absolute=absolute), session_id, usage
        )

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        """See :meth:`SessionDB.get_session`."""
        return await self._read(self._db.get_session, session_id)

    async def resolve_session_id(self, session_id_or_prefix: str) -> str | None:
        """See :meth:`SessionDB.resolve_session_id`."""
        return await self._read(self._db.resolve_session_id, session_id_or_prefix)

    # Titles -----------------------------------------------------------
    @staticmethod
    def sanitize_title(title: str | None) -> str | None:
        """The title as it would be stored (pure: no database, so not a coroutine)."""
        return clean_title(title)

    async def set_session_title(self, session_id: str, title: str | None) -> bool:
        """See :meth:`SessionDB.set_session_title`."""
        return await self._write(self._db.set_session_title, session_id, title)

    async def get_session_title(self, session_id: str) -> str | None:
        """See :meth:`SessionDB.get_session_title`."""
        return await self._read(self._db.get_session_title, session_id)

    async def get_session_by_title(self, title: str) -> dict[str, Any] | None:
        """See :meth:`SessionDB.get_session_by_title`."""
        return await self._read(self._db.get_session_by_title, title)

    async def resolve_session_by_title(self, title: str) -> str | None:
        """See :meth:`SessionDB.resolve_session_by_title`."""
        return await self._read(self._db.resolve_session_by_title, title)

    async def get_next_title_in_lineage(self, base_title: str) -> str:
        """See :meth:`SessionDB.get_next_title_in_lineage`."""
        return await self._read(self._db.get_next_title_in_lineage, base_title)

    # Messages ---------------------------------------------------------
    async def append_message(
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
        """See :meth:`SessionDB.append_message`."""
        return await self.append(
            session_id,
            MessageIn(
                role,
                content,
                tool_name,
                tool_calls,
                tool_call_id,
                token_count,
                finish_reason,
                reasoning,
                reasoning_details,
                codex_reasoning_items,
            ),
        )

    async def append(self, session_id: str, message: MessageIn) -> int:
        """See :meth:`SessionDB.append`."""
        writes = self._writes
        if writes is not None:  # checked here, queued from the loop: no thread per call
            work = append_work(session_id, message)
            deadline = self._deadline()
            return await self._offload.in_turn(
                session_id, lambda ended: writes.start(work, None, ended, deadline)
            )
        return await self._write(self._db.append, session_id, message)

    async def append_messages(
        self, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        """See :meth:`SessionDB.append_messages`."""
        return await self._write(self._db.append_messages, session_id, messages)

    async def get_messages(
        self, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.get_messages`."""
        return await self._read(self._db.get_messages, session_id, limit, offset)

    async def get_messages_around(
        self, message_id: int, before: int = 5, after: int = 5
    ) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.get_messages_around`."""
        return await self._read(self._db.get_messages_around, message_id, before, after)

    async def get_messages_as_conversation(self, session_id: str) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.get_messages_as_conversation`."""
        return await self._read(self._db.get_messages_as_conversation, session_id)

    async def clear_messages(self, session_id: str) -> None:
        """See :meth:`SessionDB.clear_messages`."""
        await self._write(self._db.clear_messages, session_id)

    async def message_count(self, session_id: str | None = None) -> int:
        """See :meth:`SessionDB.message_count`."""
        return await self._read(self._db.message_count, session_id)

    # Search -----------------------------------------------------------
    async def search_messages(
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
        """See :meth:`SessionDB.search_messages`."""
        return await self._read(
            self._db.search_messages,
            query,
            source_filter,
            exclude_sources,
            role_filter,
            limit,
            offset,
            sort,
            fields,
        )

    # Listing, lineage, usage ------------------------------------------
    async def search_sessions(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.search_sessions`."""
        return await self._read(self._db.search_sessions, source, limit, offset)

    async def list_sessions_rich(
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
        """See :meth:`SessionDB.list_sessions_rich`."""
        return await self._read(
            self._db.list_sessions_rich,
            source,
            exclude_sources,
            limit,
            offset,
            include_children,
            project_compression_tips,
            include_archived,
            include_pinned,
        )

    async def get_compression_tip(self, session_id: str) -> str:
        """See :meth:`SessionDB.get_compression_tip`."""
        return await self._read(self._db.get_compression_tip, session_id)

    async def session_count(self, source: str | None = None, include_archived: bool = False) -> int:
        """See :meth:`SessionDB.session_count`."""
        return await self._read(self._db.session_count, source, include_archived)

    async def session_count_ge(
        self, n: int, source: str | None = None, include_archived: bool = False
    ) -> bool:
        """See :meth:`SessionDB.session_count_ge`."""
        return await self._read(self._db.session_count_ge, n, source, include_archived)

    async def search_sessions_by_id(
        self, query: str, limit: int = 20, include_archived: bool = True
    ) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.search_sessions_by_id`."""
        return await self._read(self._db.search_sessions_by_id, query, limit, include_archived)

    # Archive and pin --------------------------------------------------
    async def set_session_archived(self, session_id: str, archived: bool = True) -> bool:
        """See :meth:`SessionDB.set_session_archived`."""
        return await self._write(self._db.set_session_archived, session_id, archived)

    async def set_session_pinned(self, session_id: str, pinned: bool = True) -> bool:
        """See :meth:`SessionDB.set_session_pinned`."""
        return await self._write(self._db.set_session_pinned, session_id, pinned)

    async def archive_stale_sessions(self, idle_days: float, *, exclude_pinned: bool = True) -> int:
        """See :meth:`SessionDB.archive_stale_sessions`."""
        return await self._write(
            self._db.archive_stale_sessions, idle_days, exclude_pinned=exclude_pinned
        )

    async def get_ancestors(self, session_id: str) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.get_ancestors`."""
        return await self._read(self._db.get_ancestors, session_id)

    async def get_descendants(self, session_id: str) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.get_descendants`."""
        return await self._read(self._db.get_descendants, session_id)

    async def token_usage_by_model(self) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.token_usage_by_model`."""
        return await self._read(self._db.token_usage_by_model)

    async def top_sessions_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.top_sessions_by_tokens`."""
        return await self._read(self._db.top_sessions_by_tokens, limit)

    # Export and cleanup -----------------------------------------------
    async def export_session(self, session_id: str) -> dict[str, Any] | None:
        """See :meth:`SessionDB.export_session`."""
        return await self._read(self._db.export_session, session_id)

    async def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        """See :meth:`SessionDB.export_all`."""
        return await self._read(self._db.export_all, source)

    async def iter_export(self, source: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """See :meth:`SessionDB.iter_export`: one session per step, each read on a worker.

        The argument is checked at the call (as the sync method does); the
        snapshot's read unit is closed when the iteration ends or is dropped.
        """
        rows = await self._read(self._db.iter_export, source)
        return self._rows(rows)

    async def _rows(self, rows: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            while (row := await self._offload.call(next, rows, _END)) is not _END:
                yield cast(dict[str, Any], row)
        finally:
            if self._offload.closed:  # no worker left: the snapshot is let go here
                rows.close()
            else:
                await self._offload.call(rows.close)

    async def prune_sessions(self, older_than_days: float = 90, source: str | None = None) -> int:
        """See :meth:`SessionDB.prune_sessions`."""
        return await self._write(self._db.prune_sessions, older_than_days, source)

    async def delete_session(self, session_id: str) -> bool:
        """See :meth:`SessionDB.delete_session`."""
        return await self._write(self._db.delete_session, session_id)

    async def delete_sessions(self, session_ids: Sequence[str]) -> int:
        """See :meth:`SessionDB.delete_sessions`."""
        return await self._write(self._db.delete_sessions, session_ids)

    async def count_empty_sessions(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """See :meth:`SessionDB.count_empty_sessions`."""
        return await self._read(self._db.count_empty_sessions, grace_seconds, current_session_id)

    async def delete_empty_sessions(
        self, grace_seconds: float = EMPTY_GRACE_SECONDS, current_session_id: str | None = None
    ) -> int:
        """See :meth:`SessionDB.delete_empty_sessions`."""
        return await self._write(self._db.delete_empty_sessions, grace_seconds, current_session_id)

    # Store metadata and upkeep ----------------------------------------
    async def get_meta(self, key: str) -> str | None:
        """See :meth:`SessionDB.get_meta`."""
        return await self._read(self._db.get_meta, key)

    async def set_meta(self, key: str, value: str) -> None:
        """See :meth:`SessionDB.set_meta`."""
        await self._write(self._db.set_meta, key, value)

    async def vacuum(self) -> None:
        """See :meth:`SessionDB.vacuum`."""
        await self._write(self._db.vacuum)

    async def maybe_auto_prune_and_vacuum(
        self,
        retention_days: float = 90,
        min_interval_hours: float = 24,
        vacuum: bool = True,
        min_vacuum_interval_days: float = 30,
    ) -> dict[str, Any]:
        """See :meth:`SessionDB.maybe_auto_prune_and_vacuum`."""
        return await self._write(
            self._db.maybe_auto_prune_and_vacuum,
            retention_days,
            min_interval_hours,
            vacuum,
            min_vacuum_interval_days,
        )
