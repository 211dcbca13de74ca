"""What a message is, before it is stored: its fields checked, its JSON encoded, its calls counted.

The rules every writer of messages follows -- the ``SessionDB`` facade, a
service on the repositories, an import -- so they live here once: which
fields a message has, what each may hold (the error names the field,
``messages[3].content`` inside a turn), that JSON fields are stored as their
text (empty values as NULL), and how many tool calls a message adds to its
session's counter (a list counts its items, anything else one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_store.domain.arguments import (
    INT64_MAX,
    decode_json,
    int_arg,
    json_arg,
    text_arg,
)
from hermes_store.errors import InvalidInputError

JSON_FIELDS = ("tool_calls", "reasoning_details", "codex_reasoning_items")
"""Fields stored as JSON text and given back decoded."""
TEXT_FIELDS = ("content", "tool_call_id", "tool_name", "finish_reason", "reasoning")
"""Optional text fields."""
FIELDS = frozenset({"role", "token_count", *TEXT_FIELDS, *JSON_FIELDS})
"""Every field a message takes from its writer (the keyword arguments of ``append_message``)."""


@dataclass(frozen=True, slots=True)
class MessageIn:
    """One message as its writer hands it over: the fields of ``append_message``.

    Built once by a facade (or by a service) and passed down whole, so the
    layers below name a message, not its eleven keyword arguments. Nothing is
    checked here: the repository checks it as it writes
    (:func:`message_row`), where the error can name the field.
    """

    role: str
    content: str | None = None
    tool_name: str | None = None
    tool_calls: Any = None
    tool_call_id: str | None = None
    token_count: int | None = None
    finish_reason: str | None = None
    reasoning: str | None = None
    reasoning_details: Any = None
    codex_reasoning_items: Any = None

    def fields(self) -> dict[str, Any]:
        """The message as the mapping :func:`message_row` checks (a turn's items are these)."""
        return {
            "role": self.role,
            "content": self.content,
            "tool_name": self.tool_name,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "token_count": self.token_count,
            "finish_reason": self.finish_reason,
            "reasoning": self.reasoning,
            "reasoning_details": self.reasoning_details,
            "codex_reasoning_items": self.codex_reasoning_items,
        }

    def checked(self, session_id: str) -> CheckedMessage:
        """This message checked as an append checks it, for a shared transaction to write."""
        return checked_message(session_id, self.fields())


def tool_call_total(tool_calls: Any) -> int:
    """How many calls a message carries: a list counts its items, anything else one.

    The store's one counting rule, on the value before it is stored; what
    :func:`stored_tool_call_total` gives for the text the value is stored as
    (a list or tuple is stored as a JSON array, anything else as one value).
    """
    if not tool_calls:
        return 0
    return len(tool_calls) if isinstance(tool_calls, list | tuple) else 1


def stored_tool_call_total(raw: str) -> int:
    """The same count for a stored ``tool_calls`` text (a check recomputing counters).

    A JSON array counts its items; anything else, text that is not JSON
    included (another program wrote it), counts one.
    """
    decoded = decode_json(raw)
    return len(decoded) if isinstance(decoded, list) else 1


def field_name(index: int | None, name: str) -> str:
    """How an error names a field: ``content``, or ``messages[3].content`` inside a turn."""
    return name if index is None else f"messages[{index}].{name}"


def message_row(
    session_id: str, fields: Mapping[str, Any], timestamp: float, index: int | None = None
) -> dict[str, Any]:
    """The checked ``messages`` row of one message (its id left to the database).

    ``session_id`` is the caller's, already checked once per call. This runs
    for every message the agent writes, so the common values -- None, ASCII
    text, a plain int -- pass without a call; anything else gets the full
    check of :mod:`~hermes_store.domain.arguments`, whose error names the field.
    """
    get = fields.get
    role = get("role")
    if type(role) is not str or not role.isascii() or not role.strip():
        role = text_arg(field_name(index, "role"), role, non_empty=True)
    token_count = get("token_count")
    plain_count = type(token_count) is int and 0 <= token_count <= INT64_MAX
    if token_count is not None and not plain_count:
        token_count = int_arg(field_name(index, "token_count"), token_count, minimum=0)
    row: dict[str, Any] = {
        "session_id": session_id,
        "role": role,
        "timestamp": timestamp,
        "token_count": token_count,
    }
    for name in TEXT_FIELDS:
        value = get(name)
        if value is not None and not (type(value) is str and value.isascii()):
            value = text_arg(field_name(index, name), value)
        row[name] = value
    for name in JSON_FIELDS:
        value = get(name)
        row[name] = json_arg(field_name(index, name), value) if value else None
    return row


@dataclass(slots=True)
class CheckedMessage:
    """One message checked before its unit of work runs: its row (time still to stamp), its calls.

    With shared commits an append is checked on its caller's thread, while
    another group's commit is being flushed, and only written by the group's
    leader (see :meth:`MessageRepository.append_checked
    <hermes_store.repositories.messages.MessageRepository.append_checked>`).
    """

    session_id: str
    row: dict[str, Any]
    tool_calls: int


def checked_message(session_id: str, fields: Mapping[str, Any]) -> CheckedMessage:
    """``fields`` (the keyword arguments of ``append_message``) checked as an append checks them."""
    text_arg("session_id", session_id)
    row = message_row(session_id, fields, 0.0)
    return CheckedMessage(session_id, row, tool_call_total(fields.get("tool_calls")))


def turn_rows(
    session_id: str, messages: Sequence[Mapping[str, Any]], stamp: Callable[[int], float]
) -> tuple[list[dict[str, Any]], int]:
    """The checked rows of a turn and the tool calls they add; InvalidInputError names the item.

    ``stamp(index)`` gives each message its time (a clock read per message, so
    the turn keeps its order when read back by (timestamp, id); or the time
    an export recorded).
    """
    if type(messages) is not list and (
        isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence)
    ):
        raise InvalidInputError(f"messages must be a list of dicts, got {type(messages).__name__}")
    rows = []
    calls = 0
    for index, message in enumerate(messages):
        # type() first: the ABC check costs more than a turn's other checks together.
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InvalidInputError(
                f"messages[{index}] must be a dict, got {type(message).__name__}"
            )
        if not FIELDS.issuperset(message):
            unknown = sorted(map(repr, message.keys() - FIELDS))
            raise InvalidInputError(f"messages[{index}] has unknown fields: {', '.join(unknown)}")
        if "role" not in message:
            raise InvalidInputError(f"messages[{index}] has no role")
        rows.append(message_row(session_id, message, stamp(index), index))
        calls += tool_call_total(message.get("tool_calls"))
    return rows, calls


def conversation_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """One stored message in the OpenAI format a model is replayed with.

    Tool fields only where present; reasoning fields on assistant turns only,
    where providers expect them back.
    """
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
        for name in ("reasoning_details", "codex_reasoning_items"):
            if row[name]:
                message[name] = decode_json(row[name])
    return message
