"""``hermes-store import``'s reading of an export: each JSON line checked, then added in batches.

Every line is checked against the columns' types before anything is written
(:func:`records`), so a bad line names itself and the store stays as it was;
:func:`import_one` then adds a checked session and its messages inside the
caller's write unit, keeping the file's message ids where they are free.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.types import REAL, Integer

from hermes_store.api.session_db import JSON_MESSAGE_FIELDS
from hermes_store.cli.args import CliError
from hermes_store.domain.arguments import int_arg, number_arg, text_arg
from hermes_store.domain.messages import stored_tool_call_total
from hermes_store.errors import InvalidInputError
from hermes_store.schema.tables import messages_table, sessions_table
from hermes_store.uow.unit import UnitOfWork

_SESSION_COLUMNS = list(sessions_table.columns)
_NON_EMPTY = ("id", "source", "role")
_MESSAGE_COLUMNS = [c for c in messages_table.columns if c.name not in ("id", "session_id")]


@dataclass
class Record:
    line: int
    session: dict[str, Any]
    messages: list[dict[str, Any]]
    message_ids: list[int] | None  # the file's ids, when every message has a distinct one
    flags: dict[str, bool] = field(default_factory=dict)  # archived/pinned, where exported


def _column_value(column: Any, label: str, value: Any) -> Any:
    """A value from the file checked against the column's type (None where nullable)."""
    optional = bool(column.nullable) and column.name not in ("id",)
    if value is None and not optional:
        raise InvalidInputError(f"{label} is required")
    if isinstance(column.type, Integer):  # counters, tokens: never below 0, as appends keep them
        return int_arg(label, value, optional=optional, minimum=0)
    if isinstance(column.type, REAL):  # a cost is never below 0 either; a time may be
        minimum = 0.0 if column.name.endswith("_usd") else None
        return number_arg(label, value, optional=optional, minimum=minimum)
    return text_arg(label, value, optional=optional, non_empty=column.name in _NON_EMPTY)


def _json_text(label: str, value: Any) -> str | None:
    """A decoded JSON field of an export back to the text the store keeps.

    Export decodes stored JSON and passes text that is not JSON through as
    it is; so a string that does not parse is put back raw, anything else is
    encoded again -- either way ``get_messages`` reads back the same value.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return text_arg(label, value)
    try:
        return text_arg(label, json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{label} is not JSON-serializable: {error}") from None


def parse_line(raw: bytes, line: int) -> Record | None:
    """One line of an export as checked rows; None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CliError(f"line {line}: not UTF-8 text ({error.reason})") from None
    text = text.lstrip("\ufeff") if line == 1 else text
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except ValueError as error:
        raise CliError(f"line {line}: not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise CliError(f"line {line}: expected a JSON object, got {type(obj).__name__}")
    try:
        session: dict[str, Any] = {}
        for column in _SESSION_COLUMNS:
            if column.name not in obj and column.nullable and column.name != "id":
                continue  # absent: the column's default applies
            value = obj.get(column.name)
            if column.name == "model_config" and value is not None and not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            session[column.name] = _column_value(column, column.name, value)
        if session.get("parent_session_id") == session["id"]:
            raise InvalidInputError(f"parent_session_id {session['id']!r} names the session itself")
        flags = {name: _flag(name, obj[name]) for name in ("archived", "pinned") if name in obj}
        raw_messages = obj.get("messages", [])
        if not isinstance(raw_messages, list):
            raise InvalidInputError(f"messages must be a list, got {type(raw_messages).__name__}")
        messages = []
        ids: list[Any] = []
        for index, message in enumerate(raw_messages):
            label = f"messages[{index}]."
            if not isinstance(message, dict):
                raise InvalidInputError(
                    f"messages[{index}] must be an object, got {type(message).__name__}"
                )
            row: dict[str, Any] = {"session_id": session["id"]}
            for column in _MESSAGE_COLUMNS:
                value = message.get(column.name)
                if column.name in JSON_MESSAGE_FIELDS:
                    row[column.name] = _json_text(label + column.name, value)
                else:
                    row[column.name] = _column_value(column, label + column.name, value)
            messages.append(row)
            exported_id = message.get("id")
            if isinstance(exported_id, int) and not isinstance(exported_id, bool):
                int_arg(label + "id", exported_id)  # kept as the row's id: it must fit
            ids.append(exported_id)
    except InvalidInputError as error:
        raise CliError(f"line {line}: {error}") from None
    # The counters follow the messages imported, not the numbers the line claims: a file
    # edited by hand (or cut short) would otherwise store counters that 'check' calls wrong.
    session["message_count"] = len(messages)
    session["tool_call_count"] = sum(
        stored_tool_call_total(row["tool_calls"]) for row in messages if row["tool_calls"]
    )
    keep_ids = (
        all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids)
        and len(set(ids)) == len(ids)
        and bool(ids)
    )
    order = sorted(
        range(len(messages)),
        key=lambda i: (messages[i]["timestamp"], ids[i] if keep_ids else i),
    )
    return Record(
        line=line,
        session=session,
        messages=[messages[i] for i in order],
        message_ids=[ids[i] for i in order] if keep_ids else None,
        flags=flags,
    )


def _flag(name: str, value: Any) -> bool:
    """An exported ``archived``/``pinned``: 0 or 1 (as stored), or a bool."""
    if value in (0, 1) and not isinstance(value, float):
        return bool(value)
    raise InvalidInputError(f"{name} must be 0 or 1, got {value!r}")


def records(path: Path) -> Iterator[Record]:
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            record = parse_line(raw, line)
            if record is not None:
                yield record


@dataclass
class ImportResult:
    sessions: int = 0
    messages: int = 0
    skipped: int = 0
    renumbered: int = 0
    warnings: list[str] = field(default_factory=list)
    pending_parents: dict[str, str] = field(default_factory=dict)


def _ids_free(uow: UnitOfWork, ids: list[int]) -> bool:
    """True when no stored message has an id in the range of ``ids``."""
    statement = (
        select(messages_table.c.id).where(messages_table.c.id.between(min(ids), max(ids))).limit(1)
    )
    return uow.connection.execute(statement).first() is None


def import_one(uow: UnitOfWork, record: Record, result: ImportResult) -> None:
    # Here, not at the top: the repositories build their statements at import,
    # which a reading command such as ``current`` would pay for nothing.
    from hermes_store.repositories.messages import insert_rows
    from hermes_store.repositories.sessions import insert_session_row

    values = dict(record.session)
    session_id = values["id"]
    if uow.sessions.exists(session_id):
        result.skipped += 1
        return
    parent = values.get("parent_session_id")
    if parent is not None and not uow.sessions.exists(parent):
        values["parent_session_id"] = None  # linked once the parent is in the store
        result.pending_parents[session_id] = parent
    title = values.get("title")
    if title is not None:
        owner = uow.sessions.title_owner(title, excluding=session_id)
        if owner is not None:
            values["title"] = None
            result.warnings.append(
                f"line {record.line}: title {title!r} already belongs to session {owner}; "
                f"session {session_id} imported without a title"
            )
    insert_session_row(uow.connection, uow.layout, values)
    rows = record.messages
    if record.message_ids is not None and _ids_free(uow, record.message_ids):
        rows = [{**row, "id": i} for row, i in zip(rows, record.message_ids, strict=True)]
    elif rows:
        result.renumbered += 1
    insert_rows(uow.connection, uow.layout, rows)
    _restore_flags(uow, session_id, record, result)
    result.sessions += 1
    result.messages += len(rows)


def _restore_flags(uow: UnitOfWork, session_id: str, record: Record, result: ImportResult) -> None:
    """The session's archived/pinned state as exported, where this store's file has the flags."""
    if not any(record.flags.values()):
        return  # unset flags are the columns' default (or absent on an old file)
    if not uow.layout.keeps_flags:
        set_flags = " and ".join(name for name, value in record.flags.items() if value)
        result.warnings.append(
            f"line {record.line}: session {session_id} was {set_flags} in the export; "
            "this store's file has no archived/pinned columns, so it is imported without"
        )
        return
    uow.keeping.restore_flags(
        session_id,
        archived=record.flags.get("archived", False),
        pinned=record.flags.get("pinned", False),
    )


def link_parents(uow: UnitOfWork, result: ImportResult) -> None:
    """Give imported roots the parents the file named, now that those are stored; a link
    that would close a loop (the parent descends from the child) is left out, with a warning,
    so every session stays reachable from a root."""
    for child, parent in list(result.pending_parents.items()):
        if uow.sessions.exists(parent):
            if any(entry.id == child for entry in uow.sessions.ancestors(parent)):
                result.warnings.append(
                    f"session {child}: its parent {parent} descends from it; imported as a root"
                )
                del result.pending_parents[child]
                continue
            uow.connection.execute(
                update(sessions_table)
                .where(sessions_table.c.id == child)
                .values(parent_session_id=parent)
            )
            del result.pending_parents[child]


BATCH_SESSIONS = 200
BATCH_MESSAGES = 5000
