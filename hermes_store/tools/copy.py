"""Copy a whole store into another one: ``state.db`` to PostgreSQL, typically.

:func:`copy_store` reads the source in one snapshot and writes the target in
batches, each its own transaction, so a large file moves with bounded memory
and an interrupted copy can simply be run again:

1. sessions, in id order, with ``parent_session_id`` left NULL
   (``INSERT ... ON CONFLICT DO NOTHING``: a session already in the target is
   left exactly as it is), with ``archived`` and ``pinned`` where the source has them;
2. lineage: each copied session gets its parent back, where the target row
   has none yet -- parents always exist by then, whatever the order;
3. messages, in id order, *with their ids* (so search hits, exports and
   anything else that quoted an id stay valid), again skipping ids already
   present; counters (``message_count``, tokens, costs) travel as stored.
   Into PostgreSQL they go by the ``COPY`` protocol, and from
   :data:`REBUILD_AT` messages on, with the search indexes dropped first and
   built after the last batch (:mod:`hermes_store.backends.postgresql.bulk`);
4. on PostgreSQL the ``messages.id`` identity is moved past the largest id,
   the search indexes are built where missing and ``ANALYZE`` gives the
   planner statistics;
5. verification: every source session must be in the target with the same
   number of messages, or :class:`CopyError` says which are not.

Before step 1 the target is searched for other data under the source's ids
(another session under a session id, another message under a message id, a
source title another session has): the copy is then refused with nothing
written, instead of half-merging two stores. Rows an earlier run of the same
copy left are not "other": they are skipped, so an interrupted copy is run
again.

Running it twice adds nothing and changes nothing. It copies a store at
rest: stop the writers first, since a session copied earlier is not updated
by a later run (its new messages are copied, its counters are not).

The source is opened read-only and read in its own layout (see
:mod:`hermes_store.backends.layout`): an old file is not migrated to be copied, and a
file of the agent's later schema versions gives the documented columns --
system prompts looked up where v25 keeps them, and only the agent's live
messages (rows it rewound or compacted away, ``active = 0``, are not part of
any conversation and are left behind; :attr:`CopyReport.inactive_left` counts
them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, bindparam, column, func, select, text, update
from sqlalchemy import table as sql_table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection

from hermes_store.backends.layout import KEEPING_COLUMNS, STANDARD, Layout
from hermes_store.backends.postgresql.bulk import (
    analyze,
    build_search_indexes,
    copy_new_messages,
    drop_search_indexes,
)
from hermes_store.backends.postgresql.health import advance_message_identity
from hermes_store.backends.shapes import (
    live_messages,
    message_columns,
    session_columns,
    sessions_from,
    shadowed,
    writable_messages,
    writable_sessions,
)
from hermes_store.domain.arguments import int_arg
from hermes_store.errors import StoreError
from hermes_store.schema.tables import messages_table, sessions_table
from hermes_store.uow.store import Store

S = sessions_table
M = messages_table

DEFAULT_BATCH = 20_000
"""Rows per batch, each batch one transaction of the target."""

REBUILD_AT = 50_000
"""Messages to copy from which a PostgreSQL target's search indexes are dropped and rebuilt."""

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: "sessions", "lineage", "messages" or "indexes"."""


class CopyError(StoreError):
    """The copy could not be completed, or the target does not hold what the source does."""


@dataclass
class CopyReport:
    """What a copy did; ``*_copied`` count rows new in the target, ``*_total`` the source."""

    sessions_total: int = 0
    messages_total: int = 0
    sessions_copied: int = 0
    messages_copied: int = 0
    parents_linked: int = 0
    dangling_parents: list[str] = field(default_factory=list)
    """Source sessions whose parent is not in the source: copied as roots."""
    skipped_sessions: list[str] = field(default_factory=list)
    inactive_left: int = 0
    """Messages the agent marked inactive in the source (rewound or compacted away): not copied."""


def copy_store(
    source: str | os.PathLike[str] | URL,
    target: str | os.PathLike[str] | URL,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress | None = None,
    rebuild_indexes: bool | None = None,
) -> CopyReport:
    """Copy every session and message of ``source`` into ``target``; see the module doc.

    Both are paths or SQLAlchemy URLs. Both are opened as stores, so both
    are brought to the head schema first (the target is created if need be).
    Raises :class:`CopyError` when, at the end, the target does not hold every
    source session with the same number of messages. ``rebuild_indexes``:
    drop a PostgreSQL target's search indexes before the messages and build
    them after (None: from :data:`REBUILD_AT` messages on).
    """
    batch_size = int_arg("batch_size", batch_size, minimum=1)  # before either store is opened
    report = progress or (lambda _phase, _done, _total: None)
    with Store(source, read_only=True) as source_store, Store(target) as target_store:
        if _same_database(source_store, target_store):
            raise CopyError("source and target are the same database")
        result = CopyReport()
        with source_store.read() as reader:
            read, layout = reader.connection, reader.layout
            result.sessions_total = _count(read, S)
            result.messages_total = _count_messages(read, layout)
            result.inactive_left = _count(read, M) - result.messages_total
            _refuse_orphans(read)
            _refuse_clashes(read, layout, target_store, batch_size)
            _copy_sessions(read, layout, target_store, batch_size, result, report)
            _link_parents(read, target_store, batch_size, result, report)
            bulk = target_store.engine.dialect.name == "postgresql"
            if bulk and (
                result.messages_total >= REBUILD_AT if rebuild_indexes is None else rebuild_indexes
            ):
                with target_store.write() as uow:
                    drop_search_indexes(uow.connection)
            _copy_messages(read, layout, target_store, batch_size, result, report, bulk=bulk)
            expected = _messages_per_session(read, layout)
        if target_store.engine.dialect.name == "postgresql":
            report("indexes", 0, 1)
            with target_store.write() as uow:
                advance_message_identity(uow.connection)
            build_search_indexes(target_store.engine)
            with target_store.write() as uow:
                analyze(uow.connection)
            report("indexes", 1, 1)
        with target_store.read() as uow:
            _verify(expected, uow.connection, uow.layout)
    return result


def _same_database(a: Store, b: Store) -> bool:
    if a.path is not None and b.path is not None:
        return a.path.resolve() == b.path.resolve()
    return a.url == b.url


def _refuse_orphans(read: Connection) -> None:
    """Messages of no session cannot enter a database that enforces the foreign key."""
    orphans = read.execute(
        select(func.count())
        .select_from(M)
        .where(~select(S.c.id).where(S.c.id == M.c.session_id).exists())
    ).scalar_one()
    if orphans:
        raise CopyError(
            f"{orphans} message(s) in the source belong to no session (written with foreign "
            "keys off?); 'hermes-store check' lists them; nothing was copied"
        )


# What makes a row the same row in both stores: a copy of it, left by an earlier run.
_SESSION_IDENTITY = (S.c.id, S.c.source, S.c.started_at)
_MESSAGE_IDENTITY = (M.c.id, M.c.session_id, M.c.role, M.c.timestamp)


def _refuse_clashes(read: Connection, layout: Layout, target: Store, batch_size: int) -> None:
    """Refuse, before anything is written, a target holding other data under the source's ids.

    A row of the target with a source row's id is fine if it is that row
    (an earlier, interrupted copy left it); anything else -- another session
    under a session id, another message under a message id, a source title
    another target session has -- would half-merge two stores.
    """
    sessions = _other_rows(read, target, S, _SESSION_IDENTITY, batch_size)
    messages = _other_rows(read, target, M, _MESSAGE_IDENTITY, batch_size)
    titles = _taken_titles(read, target) if "title" in layout.session_columns else []
    if not (sessions or messages or titles):
        return
    details = []
    if sessions:
        details.append(
            f"{len(sessions)} session(s) with other data under their ids: "
            + ", ".join(map(str, sessions[:5]))
        )
    if messages:
        details.append(
            f"{len(messages)} message(s) of other sessions under their ids: ids "
            + ", ".join(map(str, messages[:5]))
        )
    if titles:
        details.append(
            f"{len(titles)} title(s) another target session has, for: " + ", ".join(titles[:5])
        )
    raise CopyError(
        "the target already holds other data under the source's ids ("
        + "; ".join(details)
        + "); nothing was copied: copy into an empty store, or one an earlier copy of this "
        "source filled"
    )


def _other_rows(
    read: Connection, target: Store, table: Any, identity: tuple[Any, ...], batch_size: int
) -> list[Any]:
    """Ids of source rows whose target row under the same id is another row."""
    clashing: list[Any] = []
    columns = select(*identity)
    for rows in _identity_batches(read, table, columns, batch_size):
        ids = [row["id"] for row in rows]
        with target.read() as uow:
            there = {
                row["id"]: row
                for row in uow.connection.execute(columns.where(table.c.id.in_(ids))).mappings()
            }
        clashing += [
            row["id"] for row in rows if row["id"] in there and dict(there[row["id"]]) != row
        ]
    return clashing


def _taken_titles(read: Connection, target: Store) -> list[str]:
    """Source sessions whose title a different target session already has."""
    titled = {
        title: sid
        for sid, title in read.execute(select(S.c.id, S.c.title).where(S.c.title.is_not(None)))
    }
    if not titled:
        return []
    with target.read() as uow:
        owners = uow.connection.execute(
            select(S.c.title, S.c.id).where(S.c.title.in_(list(titled)))
        ).all()
    return sorted(titled[title] for title, owner in owners if owner != titled[title])


def _count(connection: Connection, table: Any) -> int:
    return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def _identity_batches(
    connection: Connection, table: Any, columns: Any, batch_size: int
) -> Iterator[list[dict[str, Any]]]:
    """``columns`` of every row of ``table`` (any layout has them) in id order, in batches."""
    last = None
    while True:
        statement = columns.order_by(table.c.id).limit(batch_size)
        if last is not None:
            statement = statement.where(table.c.id > last)
        rows = [dict(row) for row in connection.execute(statement).mappings()]
        if not rows:
            return
        yield rows
        last = rows[-1]["id"]


def _count_messages(connection: Connection, layout: Layout) -> int:
    live = live_messages(layout)
    return int(
        connection.execute(text(f"SELECT COUNT(*) FROM messages m WHERE 1 = 1{live}")).scalar_one()
    )


def _batches(
    connection: Connection, sql: str, key: str, batch_size: int
) -> Iterator[list[dict[str, Any]]]:
    """The rows of ``sql`` in ``key`` order, ``batch_size`` at a time (keyset pagination).

    ``sql`` holds ``{after}``: nothing for the first batch, then a condition on
    ``key`` past the last row of the batch before.
    """
    first = text(sql.format(after="") + f" ORDER BY {key} LIMIT :p_limit")
    following = text(sql.format(after=f" AND {key} > :p_last") + f" ORDER BY {key} LIMIT :p_limit")
    statement, params = first, {"p_limit": batch_size}
    while True:
        rows = [dict(row) for row in connection.execute(statement, params).mappings()]
        if not rows:
            return
        yield rows
        statement, params = following, {"p_limit": batch_size, "p_last": rows[-1]["id"]}


def _session_batches(
    connection: Connection, layout: Layout, n: int
) -> Iterator[list[dict[str, Any]]]:
    """The source's sessions, with ``archived`` and ``pinned`` where its file keeps them."""
    flags = "".join(f", s.{name}" for name in KEEPING_COLUMNS) if layout.keeps_flags else ""
    columns = session_columns(layout) + flags
    sql = f"SELECT {columns} FROM {sessions_from(layout)} WHERE 1 = 1{{after}}"
    return _batches(connection, shadowed(sql, layout), "s.id", n)


def _message_batches(
    connection: Connection, layout: Layout, n: int
) -> Iterator[list[dict[str, Any]]]:
    live = live_messages(layout)
    sql = f"SELECT {message_columns(layout)} FROM messages m WHERE 1 = 1{live}{{after}}"
    return _batches(connection, shadowed(sql, layout), "m.id", n)


def _insert_new(connection: Connection, table: Any, rows: list[dict[str, Any]]) -> int:
    """Insert ``rows``, skipping any that collide with a row already there; returns how many.

    The rows are copied as stored (JSON as its text), so they go in through a
    clause typed as the columns are stored (see ``shapes.storage_type``).
    """
    writable = writable_messages(STANDARD)[0]
    if table is S:
        writable = writable_sessions(STANDARD)
        if rows and KEEPING_COLUMNS[0] in rows[0]:  # the flags travel with their row
            writable = sql_table(
                "sessions",
                *(column(c.name, c.type) for c in writable.c),
                *(column(name, Integer()) for name in KEEPING_COLUMNS),
            )
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(writable).on_conflict_do_nothing().returning(writable.c.id)
    return len(connection.execute(statement, rows).all())


def _copy_sessions(
    read: Connection,
    layout: Layout,
    target: Store,
    batch_size: int,
    result: CopyReport,
    report: Progress,
) -> None:
    done = 0
    report("sessions", 0, result.sessions_total)
    for rows in _session_batches(read, layout, batch_size):
        orphaned = [{**row, "parent_session_id": None} for row in rows]
        with target.write() as uow:
            result.sessions_copied += _insert_new(uow.connection, S, orphaned)
            present = set(
                uow.connection.execute(
                    select(S.c.id).where(S.c.id.in_([row["id"] for row in rows]))
                ).scalars()
            )
        result.skipped_sessions += [row["id"] for row in rows if row["id"] not in present]
        done += len(rows)
        report("sessions", done, result.sessions_total)
    if result.skipped_sessions:  # refused up front by _refuse_clashes; a writer since?
        names = ", ".join(result.skipped_sessions[:5])
        raise CopyError(
            f"{len(result.skipped_sessions)} session(s) could not be written to the target "
            f"(a title used by another session there since the copy began?): {names}; "
            "no message was copied"
        )


def _link_parents(
    read: Connection, target: Store, batch_size: int, result: CopyReport, report: Progress
) -> None:
    """Give copied sessions their parents back; a target row with a parent is left alone."""
    children = read.execute(
        select(S.c.id, S.c.parent_session_id)
        .where(S.c.parent_session_id.is_not(None))
        .order_by(S.c.id)
    ).all()
    known = set(read.execute(select(S.c.id)).scalars())
    links = [{"p_id": child, "p_parent": parent} for child, parent in children if parent in known]
    result.dangling_parents = [child for child, parent in children if parent not in known]
    statement = (
        update(S)
        .where(S.c.id == bindparam("p_id"), S.c.parent_session_id.is_(None))
        .values(parent_session_id=bindparam("p_parent"))
    )
    report("lineage", 0, len(links))
    for start in range(0, len(links), batch_size):
        chunk = links[start : start + batch_size]
        with target.write() as uow:
            changed = uow.connection.execute(statement, chunk).rowcount
        result.parents_linked += max(changed, 0)
        report("lineage", start + len(chunk), len(links))


def _copy_messages(
    read: Connection,
    layout: Layout,
    target: Store,
    batch_size: int,
    result: CopyReport,
    report: Progress,
    *,
    bulk: bool,
) -> None:
    done = 0
    report("messages", 0, result.messages_total)
    columns = [c.name for c in writable_messages(STANDARD)[0].c]
    for rows in _message_batches(read, layout, batch_size):
        with target.write() as uow:
            if bulk:
                result.messages_copied += copy_new_messages(uow.connection, columns, rows)
            else:
                result.messages_copied += _insert_new(uow.connection, M, rows)
        done += len(rows)
        report("messages", done, result.messages_total)


def _messages_per_session(connection: Connection, layout: Layout) -> dict[str, int]:
    """Each session's number of (live) messages."""
    statement = text(
        "SELECT s.id, COUNT(m.id) FROM sessions s "
        f"LEFT JOIN messages m ON m.session_id = s.id{live_messages(layout)} GROUP BY s.id"
    )
    return {str(sid): int(n) for sid, n in connection.execute(statement)}


def _verify(expected: dict[str, int], target: Connection, layout: Layout) -> None:
    """Every source session in the target with as many messages; CopyError otherwise."""
    found = _messages_per_session(target, layout)
    missing = [sid for sid in expected if sid not in found]
    differing = [sid for sid, n in expected.items() if sid in found and found[sid] != n]
    if missing or differing:
        details = []
        if missing:
            details.append(f"{len(missing)} session(s) missing: {', '.join(missing[:5])}")
        if differing:
            shown = ", ".join(f"{sid} ({expected[sid]} vs {found[sid]})" for sid in differing[:5])
            details.append(f"{len(differing)} session(s) with other message counts: {shown}")
        raise CopyError(
            "verification failed, the target does not hold the source: " + "; ".join(details)
        )
