"""The ORM session of a unit of work: entities on the unit's connection, in its transaction.

``uow.orm`` (see :class:`~hermes_store.uow.unit.UnitOfWork`) is a SQLAlchemy
``Session`` bound to the unit's own connection, made the first time it is
asked for -- a unit that never asks pays nothing. It joins the unit's
transaction, the way SQLAlchemy's "joining a Session into an external
transaction" recipe does, with ``join_transaction_mode="create_savepoint"``:

* **one commit, the unit's.** ``uow.orm.commit()`` flushes and releases the
  session's SAVEPOINT; nothing is committed until the unit's block ends,
  which flushes what is still pending and then commits everything -- ORM
  changes, repository writes and Core statements -- in one COMMIT;
* **one rollback, the unit's.** An exception leaving the block rolls back
  everything. ``uow.orm.rollback()`` goes back to the session's SAVEPOINT
  (taken at its first use, and again after each ``commit()``): it undoes what
  was written on the unit's connection since then, ORM or not, and the unit's
  transaction stays open;
* **the unit's lock rules.** The session runs inside the unit's transaction:
  a write unit's ``BEGIN IMMEDIATE`` (or PostgreSQL's rules) already holds
  what it needs, and a read unit's session reads its snapshot and never writes.

A flush keeps the store's rules, as the repositories do (:class:`FlushRules`,
run in ``before_flush``, before any row is written):

* values are checked by column -- text is text, counts are integers, JSON
  is JSON, required columns are set -- and refused as
  :class:`~hermes_store.errors.InvalidInputError` naming ``table.column``;
  a title is cleaned as ``SessionDB.set_session_title`` cleans it, and one
  another session holds is a :class:`~hermes_store.errors.TitleConflictError`;
* a message added, deleted or moved keeps its session's ``message_count`` and
  ``tool_call_count`` exact: one ``UPDATE ... SET n = n + :k`` per session per
  flush (:meth:`SessionRepository.bump_counters
  <hermes_store.repositories.sessions.SessionRepository.bump_counters>`), the
  counts by the rule the health check recounts with
  (:func:`~hermes_store.domain.messages.stored_tool_call_total`); a message
  of a session that does not exist is
  :class:`~hermes_store.errors.SessionNotFoundError` and nothing is written;
* a session deleted through the ORM follows the store's rule: its messages
  are deleted (one statement) and its children become roots;
* the FTS triggers index rows the ORM inserts like any other row.

Where the session cannot write safely it refuses before any SQL, naming why:
in a read unit (:class:`~hermes_store.errors.ReadOnlyUnitError`), and on a
file whose layout is not the store's own -- the Hermes agent's schema
versions 7..25, or an old file read without being migrated
(:class:`~hermes_store.errors.SchemaError`): the mapped classes know only the
documented columns, and such files need more (``active = 1``, system prompts
kept by hash). Reading is offered where the mapped classes read what the
store's own reads return (see :func:`orm_reads_refused`). ORM bulk
statements (``session.execute(update(Message)...)``) skip the flush and its
rules, so they are refused too; write through entities, the repositories, or
your own SQL on ``uow.connection``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Integer, Text, event, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.orm import ORMExecuteState, UOWTransaction
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm.state import InstanceState
from sqlalchemy.sql.sqltypes import REAL

from hermes_store.backends.layout import MESSAGE_COLUMNS, SESSION_COLUMNS, Layout
from hermes_store.domain.arguments import int_arg, number_arg, text_arg
from hermes_store.domain.messages import stored_tool_call_total
from hermes_store.domain.titles import clean_title
from hermes_store.errors import (
    InvalidInputError,
    ReadOnlyUnitError,
    SchemaError,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_store.repositories.messages import MessageRepository
from hermes_store.repositories.sessions import SessionRepository
from hermes_store.schema.models import Message, Session
from hermes_store.schema.state import Ladder
from hermes_store.schema.types import JSONText

_NON_EMPTY = frozenset({"sessions.id", "sessions.source", "messages.role"})
"""Text columns an empty string is refused for, as ``SessionDB`` refuses them."""


def orm_reads_refused(layout: Layout) -> str | None:
    """Why the mapped classes cannot read a file of ``layout`` as the store does, or None.

    They select the documented columns and nothing else. That is what the
    store's reads return on its own files and on the agent's v7..v11 files;
    it is not where a documented column is missing (an old file read without
    being migrated: the SELECT would fail), where messages carry the agent's
    ``active`` flag (v12 and later: rewound and compacted-away rows would show
    as part of the conversation) or where system prompts are kept by hash
    (v25: ``Session.system_prompt`` would read NULL).
    """
    missing = [
        f"{table}.{name}"
        for table, present, documented in (
            ("sessions", layout.session_columns, SESSION_COLUMNS),
            ("messages", layout.message_columns, MESSAGE_COLUMNS),
        )
        for name in documented
        if name not in present
    ]
    if missing:
        return f"it lacks the documented column(s) {', '.join(missing)} (not migrated)"
    if layout.tracks_active:
        return (
            "its messages carry the agent's 'active' flag, which the mapped classes do not "
            "filter on (rewound and compacted-away messages would read as live ones)"
        )
    if layout.system_prompts:
        return (
            "it keeps system prompts by hash in system_prompts "
            "(Session.system_prompt would read NULL)"
        )
    return None


def _describe(layout: Layout) -> str:
    """Which file the refusal is about, in the words of ``hermes-store current``."""
    if layout.ladder is Ladder.AGENT:
        return f"the Hermes agent's schema_version {layout.schema_version}"
    return f"schema_version {layout.schema_version}, not migrated"


class UnitSession(OrmSession):
    """The ORM session of one unit of work; see the module docstring for its rules.

    ``expire_on_commit=False``: the unit's transaction is still open after
    ``uow.orm.commit()``, so nothing loaded is stale, and entities keep the
    values they had after the unit ends (detached: reading a relationship
    not loaded then raises ``DetachedInstanceError``).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        write: bool,
        layout: Layout,
        where: str,
        sessions: SessionRepository,
        messages: MessageRepository,
    ) -> None:
        super().__init__(
            bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        self.rules = FlushRules(
            write=write, layout=layout, where=where, sessions=sessions, messages=messages
        )

    def bulk_save_objects(self, *_args: Any, **_kwargs: Any) -> None:
        """Refused: the legacy bulk methods skip the flush events, and so the store's rules."""
        raise InvalidInputError(_BULK_REFUSED.format(what="bulk_save_objects"))

    def bulk_insert_mappings(self, *_args: Any, **_kwargs: Any) -> None:
        """Refused, as :meth:`bulk_save_objects`."""
        raise InvalidInputError(_BULK_REFUSED.format(what="bulk_insert_mappings"))

    def bulk_update_mappings(self, *_args: Any, **_kwargs: Any) -> None:
        """Refused, as :meth:`bulk_save_objects`."""
        raise InvalidInputError(_BULK_REFUSED.format(what="bulk_update_mappings"))


_BULK_REFUSED = (
    "uow.orm refuses {what}: it skips the flush, and with it the counters, the checks and "
    "the delete rule; change entities (session.add, session.delete), write through "
    "uow.sessions / uow.messages, or run your own SQL on uow.connection"
)


def open_unit_session(
    connection: Connection,
    *,
    write: bool,
    layout: Layout,
    where: str,
    sessions: SessionRepository,
    messages: MessageRepository,
) -> UnitSession:
    """The ORM session of a unit whose transaction SQLAlchemy's ``connection`` knows is open.

    A ``Session`` bound to a connection outside a transaction would begin one
    of its own, and its ``commit()`` would commit it: the unit must have made
    the connection aware of its transaction first (see ``UnitOfWork.orm``).
    Refused, naming why, on a file the mapped classes cannot read as the
    store does (:func:`orm_reads_refused`).
    """
    if not connection.in_transaction():
        raise RuntimeError("the unit's transaction must be open on the connection first")
    why = orm_reads_refused(layout)
    if why is not None:
        raise SchemaError(
            f"{where} is at {_describe(layout)}: uow.orm cannot read it as the store does, "
            f"because {why}; read it through the unit's repositories (uow.sessions, "
            "uow.messages, uow.search) or SessionDB"
        )
    return UnitSession(
        connection,
        write=write,
        layout=layout,
        where=where,
        sessions=sessions,
        messages=messages,
    )


class FlushRules:
    """What a unit's ORM session checks and keeps before each flush writes anything."""

    def __init__(
        self,
        *,
        write: bool,
        layout: Layout,
        where: str,
        sessions: SessionRepository,
        messages: MessageRepository,
    ) -> None:
        self.write = write
        self.layout = layout
        self.where = where
        self.sessions = sessions
        """The unit's own repositories: the counter and delete verbs every writer uses."""
        self.messages = messages

    # -- may this session write at all? ----------------------------------
    def refuse_writes(self, what: str) -> None:
        """Raise the error that says why this session may not write, if it may not."""
        if not self.write:
            raise ReadOnlyUnitError(
                f"uow.orm of a read unit of work (store.read()) cannot write: {what} would "
                "have been flushed; nothing was written (change entities in store.write())"
            )
        if not self.layout.standard:
            raise SchemaError(
                f"{self.where} is at {_describe(self.layout)}: uow.orm writes only files in the "
                f"store's own layout, because the mapped classes know only the documented "
                f"columns and this file needs more (the agent's 'active' flag, system prompts "
                f"kept by hash, its own columns); {what} would have been flushed; nothing was "
                "written: write through uow.sessions and uow.messages, or SessionDB"
            )

    # -- before_flush ----------------------------------------------------
    def before_flush(self, session: OrmSession) -> None:
        changed = [obj for obj in session.dirty if session.is_modified(obj)]
        new, deleted = list(session.new), list(session.deleted)
        if not (new or changed or deleted):
            return
        self.refuse_writes(_pending_summary(new, changed, deleted))
        # The session's SAVEPOINT now, before this hook writes counters: a flush
        # that fails after them rolls back to it, counters included.
        session.connection()
        for obj in new:
            _check_values(obj, every_column=True)
        for obj in changed:
            _check_values(obj, every_column=False)
        self._check_sessions(session, new, changed)
        doomed = {obj.id for obj in deleted if isinstance(obj, Session)}
        self._keep_counters(session, new, changed, deleted, doomed)
        if doomed:
            self._delete_messages_of(session, doomed)

    def _check_sessions(self, session: OrmSession, new: list[Any], changed: list[Any]) -> None:
        """Parents that exist, titles cleaned and free: the store's rules for a session row."""
        pending = {obj.id for obj in new if isinstance(obj, Session)}
        for obj in (*new, *changed):
            if not isinstance(obj, Session):
                continue
            state: InstanceState[Any] = _state(obj)
            fresh = obj in new
            parent_set = state.attrs.parent.history.added
            if (fresh or state.attrs.parent_session_id.history.added) and not parent_set:
                parent = obj.parent_session_id
                known = parent is None or parent in pending or self.sessions.exists(parent)
                if not known:
                    raise InvalidInputError(
                        f"sessions.parent_session_id {parent!r} names no session; nothing was "
                        "written"
                    )
            if fresh or state.attrs.title.history.added:
                cleaned = clean_title(obj.title)
                if cleaned != obj.title:
                    obj.title = cleaned
                if cleaned is not None:
                    owner = self.sessions.title_owner(cleaned, excluding=obj.id)
                    if owner is not None:
                        raise TitleConflictError(
                            f"title {cleaned!r} is already in use by session {owner}; "
                            "nothing was written"
                        )

    def _keep_counters(
        self,
        session: OrmSession,
        new: list[Any],
        changed: list[Any],
        deleted: list[Any],
        doomed: set[str],
    ) -> None:
        """One counter UPDATE per session whose messages this flush adds, deletes or moves."""
        deltas: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        added: set[str] = set()

        def count(session_id: str | None, messages: int, tool_calls: Any) -> None:
            if session_id is None:
                raise InvalidInputError(
                    "messages.session_id is required (set message.session or session_id); "
                    "nothing was written"
                )
            delta = deltas[session_id]
            delta[0] += messages
            delta[1] += messages * tool_calls_counted(tool_calls)
            if messages > 0:
                added.add(session_id)

        for obj in new:
            if isinstance(obj, Message):
                count(_target_session(obj), 1, obj.tool_calls)
        for obj in deleted:
            if isinstance(obj, Message):
                count(_committed(obj, "session_id"), -1, _committed(obj, "tool_calls"))
        for obj in changed:
            if isinstance(obj, Message):
                before = (_committed(obj, "session_id"), _committed(obj, "tool_calls"))
                after = (_target_session(obj), obj.tool_calls)
                if before != after:
                    count(before[0], -1, before[1])
                    count(after[0], 1, after[1])
        for session_id in sorted(added & doomed):  # a message for a session deleted here too
            raise SessionNotFoundError(session_id)
        pending = {obj.id: obj for obj in new if isinstance(obj, Session)}
        bumped: list[tuple[str, int, int]] = []
        # In id order: concurrent writers take the row locks in one order (PostgreSQL).
        for session_id, (messages, tool_calls) in sorted(deltas.items()):
            if session_id in doomed or (messages == 0 and tool_calls == 0):
                continue  # a deleted session's row and messages go anyway
            row = pending.get(session_id)
            if row is not None:  # inserted by this flush: its first values include them
                row.message_count = (row.message_count or 0) + messages
                row.tool_call_count = (row.tool_call_count or 0) + tool_calls
                continue
            if not self.sessions.bump_counters(session_id, messages, tool_calls):
                self._undo(bumped)
                raise SessionNotFoundError(session_id)
            bumped.append((session_id, messages, tool_calls))
            _expire_counters(session, session_id)

    def _undo(self, bumped: Iterable[tuple[str, int, int]]) -> None:
        """Take back this flush's counter updates: a refused flush leaves nothing written."""
        for session_id, messages, tool_calls in bumped:
            self.sessions.bump_counters(session_id, -messages, -tool_calls)

    def _delete_messages_of(self, session: OrmSession, doomed: set[str]) -> None:
        """The store's rule for a deleted session: its messages go first, in one statement.

        (Its children become roots through the ORM itself: ``Session.children``
        has no delete cascade, so the flush sets their ``parent_session_id``
        NULL before it deletes the row.) Message entities of those sessions
        still in this session are expunged: their rows are gone.
        """
        for session_id in sorted(doomed):
            self.messages.delete_rows_of(session_id)
        for obj in list(session.identity_map.values()):
            if isinstance(obj, Message) and _committed(obj, "session_id") in doomed:
                session.expunge(obj)


_TOOL_CALLS = JSONText("messages.tool_calls")
"""The type of ``messages.tool_calls``, for the count of what a value will be stored as."""


def tool_calls_counted(value: Any) -> int:
    """How many tool calls ``value`` adds to ``tool_call_count`` once stored.

    The rule the health check recounts with, applied to the text the column
    will hold: nothing for an empty value (stored as NULL), a JSON array's
    items, one for anything else.
    """
    encoded = _TOOL_CALLS.encode(value)
    return 0 if encoded is None else stored_tool_call_total(encoded)


def _state(obj: Any) -> InstanceState[Any]:
    state: InstanceState[Any] = inspect(obj)
    return state


def _committed(obj: Any, key: str) -> Any:
    """The value ``key`` has in the database (before this flush), loading it if needed."""
    history = _state(obj).attrs[key].load_history()
    if history.deleted:
        return history.deleted[0]
    if history.unchanged:
        return history.unchanged[0]
    return None


def _target_session(message: Message) -> str | None:
    """The session a message belongs to after this flush: its ``session`` if set, else the id.

    A changed ``message.session`` wins over ``session_id`` at flush time (the
    ORM copies the related row's key into the column), so it wins here too.
    """
    state = _state(message)
    relationship = state.attrs.session
    if relationship.history.added:
        target = relationship.history.added[0]
        return None if target is None else target.id
    if message.session_id is None and "session" in state.dict and state.dict["session"]:
        return state.dict["session"].id
    return message.session_id


def _expire_counters(session: OrmSession, session_id: str) -> None:
    """A loaded Session whose counters the UPDATE moved reads them again when next asked."""
    obj = session.identity_map.get(session.identity_key(Session, (session_id,)))
    if obj is None:
        return
    state = _state(obj)
    if not (state.attrs.message_count.history.added or state.attrs.tool_call_count.history.added):
        session.expire(obj, ["message_count", "tool_call_count"])


def _check_values(obj: Any, *, every_column: bool) -> None:
    """Check an entity's values column by column, as the repositories' callers are checked."""
    state = _state(obj)
    table = obj.__table__
    for column in table.columns:
        key = column.key
        if not every_column and not state.attrs[key].history.added:
            continue
        value = state.dict.get(key)
        label = f"{table.name}.{key}"
        if value is None:
            if _required(column, obj):
                raise InvalidInputError(f"{label} is required, got None; nothing was written")
            continue
        column_type = column.type
        if isinstance(column_type, JSONText):
            column_type.encode(value)
        elif isinstance(column_type, Integer):
            int_arg(label, value, minimum=0)
        elif isinstance(column_type, REAL):
            number_arg(label, value)
        elif isinstance(column_type, Text):
            checked = text_arg(label, value, non_empty=label in _NON_EMPTY)
            if checked is not value:  # a lone surrogate became U+FFFD: store that
                setattr(obj, key, checked)


def _required(column: Any, obj: Any) -> bool:
    """A NULL the flush would send for a column that refuses it (or that the store requires)."""
    if column.key == "id":
        return isinstance(obj, Session)  # a session's id is its name; a message's is given
    if column.key == "session_id" and isinstance(obj, Message):
        return _target_session(obj) is None
    return not column.nullable and column.server_default is None and column.default is None


def _pending_summary(new: list[Any], changed: list[Any], deleted: list[Any]) -> str:
    groups = ((new, "new"), (changed, "changed"), (deleted, "deleted"))
    parts = [f"{len(group)} {label}" for group, label in groups if group]
    return ", ".join(parts) + " object(s)"


@event.listens_for(UnitSession, "before_flush")
def _before_flush(session: OrmSession, _context: UOWTransaction, _instances: Any) -> None:
    assert isinstance(session, UnitSession)
    session.rules.before_flush(session)


@event.listens_for(UnitSession, "do_orm_execute")
def _refuse_bulk_writes(state: ORMExecuteState) -> None:
    """ORM bulk INSERT/UPDATE/DELETE skip the flush and its rules: refused, naming the way."""
    if not (state.is_insert or state.is_update or state.is_delete):
        return
    session = state.session
    assert isinstance(session, UnitSession)
    session.rules.refuse_writes("an ORM bulk statement")
    kind = "INSERT" if state.is_insert else "UPDATE" if state.is_update else "DELETE"
    mapper = state.bind_mapper
    target = mapper.class_.__name__ if mapper is not None else "a mapped class"
    raise InvalidInputError(
        f"uow.orm refuses an ORM bulk {kind} of {target}: it skips the flush, and with it "
        "the counters, the checks and the delete rule; change entities (session.add, "
        "session.delete), write through uow.sessions / uow.messages, or run your own SQL "
        "on uow.connection"
    )
