"""What every part of the sessions repository shares: its statements per file layout,
its connection, the counters and the stored prompts.

The repository is split by concern (:mod:`.sessions` lifecycle and queries,
:mod:`.session_titles`, :mod:`.session_usage`, :mod:`.session_pruning`); each part
is a class over :class:`SessionBase`, and
:class:`~hermes_store.repositories.sessions.SessionRepository` is all of them.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Text,
    bindparam,
    column,
    func,
    insert,
    literal_column,
    table,
    text,
)
from sqlalchemy import update as sql_update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import BindParameter

from hermes_store.backends import backend_of
from hermes_store.backends.base import Backend
from hermes_store.backends.layout import STANDARD, Layout
from hermes_store.backends.prepared import Prepared
from hermes_store.backends.shapes import (
    session_columns,
    sessions_from,
    shadowed,
    writable_sessions,
)
from hermes_store.domain.arguments import (
    int_arg,
    text_arg,
)
from hermes_store.errors import SessionNotFoundError
from hermes_store.schema.tables import messages_table, sessions_table

S = sessions_table

M = messages_table


def param(name: str, type_: Any = None) -> BindParameter[Any]:
    """A bind parameter whose name cannot clash with a column in SET/VALUES."""
    return bindparam(f"p_{name}", type_=type_)


def sourced(sql: str) -> Any:
    """A text statement with an optional ``:p_source`` filter (None means every source)."""
    return text(sql).bindparams(bindparam("p_source", type_=Text))


def update_by_id() -> Any:
    """An UPDATE of the one session ``:p_id`` (its values and conditions added after)."""
    return sql_update(S).where(S.c.id == param("id"))


# The COALESCE's 0 is spelled into the SQL: as a bound literal it would be a
# parameter merged into every call's mapping (see ``Prepared``'s fixed values).
_BUMP_COUNTERS = Prepared(
    update_by_id().values(
        message_count=func.coalesce(S.c.message_count, literal_column("0")) + param("messages"),
        tool_call_count=func.coalesce(S.c.tool_call_count, literal_column("0"))
        + param("tool_calls"),
    )
)

_SET_COUNTERS = update_by_id().values(
    message_count=param("messages"), tool_call_count=param("tool_calls")
)

_TITLE_OWNER = "SELECT id FROM sessions WHERE title = :p_title AND id != :p_id"

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

_COUNT = "SELECT COUNT(*) FROM sessions WHERE (:p_source IS NULL OR source = :p_source)"


@dataclass(frozen=True)
class Reads:
    """The statements that read sessions, shaped for one file layout (see :mod:`.shapes`)."""

    get: Prepared
    by_title: Any
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


def in_layout(sql: str, layout: Layout) -> Any:
    """``sql`` with the layout's session columns and source, shadowed where it hides rows."""
    shape = {"columns": session_columns(layout), "sessions": sessions_from(layout)}
    return text(shadowed(sql.format(**shape), layout))


@lru_cache(maxsize=16)
def reads_for(layout: Layout) -> Reads:
    def read(sql: str) -> Any:
        return in_layout(sql, layout)

    def sourced(sql: str) -> Any:
        return read(sql).bindparams(bindparam("p_source", type_=Text))

    writable = writable_sessions(layout)
    if layout.system_prompts:  # a new clause: the cached one is shared
        writable = table(
            "sessions",
            *(column(c.name, c.type) for c in writable.c),
            column("system_prompt_hash", Text()),
        )
    return Reads(
        get=Prepared(read(_GET)),
        by_title=read(_BY_TITLE),
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
STORE_PROMPT = text(
    "INSERT OR IGNORE INTO system_prompts (hash, prompt) VALUES (:p_hash, :p_prompt)"
)

DROP_UNUSED_PROMPTS = text(
    "DELETE FROM system_prompts WHERE NOT EXISTS "
    "(SELECT 1 FROM sessions WHERE sessions.system_prompt_hash = system_prompts.hash)"
)


def prompt_hash(prompt: str) -> str:
    """The key the agent's v25 stores a system prompt under: SHA-256 of its UTF-8, in hex."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


STANDARD_READS = reads_for(STANDARD)


def page_args(source: str | None, limit: int, offset: int) -> tuple[str | None, int, int]:
    """A page's arguments checked: the source filter, the limit and the offset."""
    return (
        text_arg("source", source, optional=True),
        int_arg("limit", limit, minimum=0),
        int_arg("offset", offset, minimum=0),
    )


class SessionBase:
    """One unit's connection to ``sessions``, in its file's layout: what the parts share."""

    def __init__(
        self,
        connection: Connection,
        layout: Layout = STANDARD,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._c = connection
        self._layout = layout
        self._clock = clock
        self._r = STANDARD_READS if layout is STANDARD else reads_for(layout)

    @property
    def _backend(self) -> Backend:
        """The connection's backend, looked up where a statement needs it (an append does not)."""
        return backend_of(self._c)

    def bump_counters(self, session_id: str, messages: int, tool_calls: int) -> bool:
        """Add to the counters in one atomic UPDATE; False if the session is unknown.

        Only the messages repository and a unit's ORM flush (:mod:`hermes_store.uow.orm`)
        call this, for the messages they write: the counters always follow the rows.
        """
        params = {"p_id": session_id, "p_messages": messages, "p_tool_calls": tool_calls}
        return _BUMP_COUNTERS.rowcount(self._c, params) > 0

    def zero_counters(self, session_id: str) -> bool:
        """Both counters to zero, the session's messages being cleared; False if unknown."""
        params = {"p_id": session_id, "p_messages": 0, "p_tool_calls": 0}
        return self._changed(_SET_COUNTERS, params)

    def drop_unused_prompts(self) -> None:
        """Delete the stored system prompts no session refers to (the agent's v25 table)."""
        if self._r.system_prompts:
            self._c.execute(DROP_UNUSED_PROMPTS)

    def _prompt_by_hash(self, prompt: str | None) -> dict[str, Any]:
        """Keep ``prompt`` in ``system_prompts``; the row then holds its hash, not the text."""
        if prompt is None:
            return {"system_prompt": None, "system_prompt_hash": None}
        key = prompt_hash(prompt)
        self._c.execute(STORE_PROMPT, {"p_hash": key, "p_prompt": prompt})
        return {"system_prompt": None, "system_prompt_hash": key}

    def _changed(self, statement: Any, params: dict[str, Any]) -> bool:
        return self._c.execute(statement, params).rowcount > 0

    def _rows(self, statement: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(row) for row in self._c.execute(statement, params).mappings()]

    @staticmethod
    def _require(found: bool, session_id: str) -> None:
        if not found:
            raise SessionNotFoundError(session_id)
