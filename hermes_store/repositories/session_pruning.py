"""Pruning: deleting old ended sessions, in one transaction or in short batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    bindparam,
    text,
)

from hermes_store.domain.arguments import (
    number_arg,
    text_arg,
)
from hermes_store.domain.messages import stored_tool_call_total
from hermes_store.repositories.session_base import (
    SessionBase,
    sourced,
)

SECONDS_PER_DAY = 86400.0

# Prune: ended sessions started before the cutoff, optionally of one source; where the
# file has the agent's flags (revision 0016), never a pinned one.
_PRUNABLE = (
    "ended_at IS NOT NULL AND started_at < :p_cutoff AND (:p_source IS NULL OR source = :p_source)"
)


# What deleting a session's messages costs scales with their text (each FTS index
# tokenizes it again to delete it), which varies 15-fold between sessions.
def _batch(sql: str) -> Any:
    return sourced(sql).bindparams(bindparam("p_ids", expanding=True))


@dataclass(frozen=True)
class _PruneStatements:
    """Prune in batches (see hermes_store.uow.pruning): the plan lists the prunable
    sessions oldest first with their stored message counts; a batch deletes those of its
    ids that are still prunable under the same cutoff -- one reopened meanwhile stays.
    A session too big for one batch is emptied a slice at a time first (oldest messages
    first), its counters following each slice, while it is still prunable."""

    plan: Any
    batch: tuple[Any, ...]
    batch_sessions: Any
    trim_slice: Any


@lru_cache(maxsize=2)
def _prune_statements(spares_pinned: bool) -> _PruneStatements:
    prunable = _PRUNABLE + (" AND pinned = 0" if spares_pinned else "")
    doomed = f"SELECT id FROM sessions WHERE id IN :p_ids AND {prunable}"
    return _PruneStatements(
        plan=sourced(
            "SELECT id, COALESCE(message_count, 0) FROM sessions "
            f"WHERE {prunable} ORDER BY started_at, id"
        ),
        batch=(
            _batch(
                "UPDATE sessions SET parent_session_id = NULL "
                f"WHERE parent_session_id IN ({doomed})"
            ),
            _batch(f"DELETE FROM messages WHERE session_id IN ({doomed})"),
        ),
        batch_sessions=_batch(f"DELETE FROM sessions WHERE id IN :p_ids AND {prunable}"),
        trim_slice=sourced(
            "SELECT m.id, m.tool_calls FROM messages m WHERE m.session_id = :p_id "
            f"AND EXISTS (SELECT 1 FROM sessions WHERE id = :p_id AND {prunable}) "
            "ORDER BY m.id LIMIT :p_limit"
        ),
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

GUARD_CHUNK = 500
"""Ids per statement of the broken-delete check (SQLite's limit on bound variables)."""


class SessionPruning(SessionBase):
    """Pruning of sessions: what a prune deletes, and the batches and slices it deletes in."""

    @property
    def _prunes(self) -> _PruneStatements:
        """The prune statements of this file: pinned sessions spared where it has the flag."""
        return _prune_statements(self._layout.keeps_flags)

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
        for start in range(0, len(doomed), GUARD_CHUNK):
            self.prune_batch(doomed[start : start + GUARD_CHUNK], params)
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
        found = [(row[0], int(row[1])) for row in self._c.execute(self._prunes.plan, params)]
        for start in range(0, len(found), GUARD_CHUNK):
            chunk = [session_id for session_id, _ in found[start : start + GUARD_CHUNK]]
            self._backend.refuse_broken_deletes(self._c, self._layout, chunk)
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
        for statement in self._prunes.batch:
            self._c.execute(statement, batch)
        deleted = self._c.execute(self._prunes.batch_sessions, batch).rowcount
        if deleted and tidy:
            self.drop_unused_prompts()
        return int(deleted)

    def prune_slice(self, session_id: str, params: dict[str, Any], limit: int) -> int:
        """Delete up to ``limit`` of a still-prunable session's oldest messages; how many went.

        For a session bigger than a batch (see :mod:`hermes_store.uow.pruning`):
        its message and tool-call counters drop with the rows, so they agree
        with what is left after every commit; the session itself goes with its
        last messages in :meth:`prune_batch`.
        """
        sliced = self._c.execute(
            self._prunes.trim_slice, {**params, "p_id": session_id, "p_limit": limit}
        )
        rows = sliced.all()
        if not rows:
            return 0
        calls = sum(stored_tool_call_total(raw) for _, raw in rows if raw)
        self._c.execute(_DELETE_MESSAGE_IDS, {"p_ids": [row[0] for row in rows]})
        self.bump_counters(session_id, -len(rows), -calls)
        return len(rows)

    def merge_fts_step(self) -> None:
        """A bounded FTS5 merge step on each index this process can load (SQLite only).

        Each batch of a prune in batches takes one (see :data:`FTS_MERGE_PAGES`):
        it keeps the batches short. A prune in one transaction has no batches
        to keep short, and takes none.
        """
        for statement in self._backend.merge_fts_sql(self._layout, FTS_MERGE_PAGES):
            self._c.exec_driver_sql(statement)
