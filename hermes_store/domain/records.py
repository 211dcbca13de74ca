"""Typed read models: what the repositories give back.

Small frozen dataclasses rather than the ORM's entities, because the hot
reads (a session's messages, search hits) run prepared statements on the
driver and build these straight from its rows -- an ORM identity map and
change tracking would cost more than the read itself. The ORM entities
(:mod:`hermes_store.schema.models`) are there for services that want to
query and change rows with relationships; both describe the same rows.

Every record has :meth:`as_dict`, which gives the plain ``dict`` the old
``SessionDB`` API returns (its keys are the record's fields, in order).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

_R = TypeVar("_R", bound="Record")


@dataclass(frozen=True, slots=True)
class Record:
    """Base: construction from a row and the plain-dict form of the old API."""

    def as_dict(self) -> dict[str, Any]:
        """The record as the old API's dict (a new dict: the caller may change it)."""
        return {name: getattr(self, name) for name in self.field_names()}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The record's field names in order (kept on the class after the first call)."""
        names: tuple[str, ...] | None = cls.__dict__.get("_names")
        if names is None:
            names = tuple(field.name for field in fields(cls))
            type.__setattr__(cls, "_names", names)
        return names

    @classmethod
    def from_mapping(cls: type[_R], row: dict[str, Any]) -> _R:
        """The record of a row keyed by column name (extra keys are an error)."""
        return cls(**row)


@dataclass(frozen=True, slots=True)
class SessionRecord(Record):
    """One row of ``sessions``: the documented columns."""

    id: str
    source: str
    user_id: str | None
    model: str | None
    model_config: str | None
    """As stored: JSON text (``SessionDB`` gives it back as stored, like the old class)."""
    system_prompt: str | None
    parent_session_id: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    message_count: int | None
    tool_call_count: int | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    billing_provider: str | None
    billing_base_url: str | None
    billing_mode: str | None
    estimated_cost_usd: float | None
    actual_cost_usd: float | None
    cost_status: str | None
    cost_source: str | None
    pricing_version: str | None
    title: str | None


@dataclass(frozen=True, slots=True)
class MessageRecord(Record):
    """One row of ``messages``, its JSON fields decoded (text that is not JSON stays text)."""

    id: int
    session_id: str
    role: str
    content: str | None
    tool_call_id: str | None
    tool_calls: Any
    tool_name: str | None
    timestamp: float
    token_count: int | None
    finish_reason: str | None
    reasoning: str | None
    reasoning_details: Any
    codex_reasoning_items: Any


@dataclass(frozen=True, slots=True)
class ContextLine(Record):
    """A message beside a search hit, cut to 200 characters."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class SearchHit(Record):
    """A matching message: where it is, its ``>>>marked<<<`` snippet, and its neighbours."""

    id: int
    session_id: str
    role: str
    snippet: str
    timestamp: float
    tool_name: str | None
    source: str
    model: str | None
    session_started: float
    context: tuple[ContextLine, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.field_names()}
        data["context"] = [line.as_dict() for line in self.context]
        return data


@dataclass(frozen=True, slots=True)
class LineageEntry(Record):
    """A session in an ancestry or descendancy walk."""

    id: str
    title: str | None
    started_at: float
    parent_session_id: str | None


@dataclass(frozen=True, slots=True)
class ModelUsage(Record):
    """Token and cost totals of the sessions of one model."""

    model: str
    session_count: int
    total_input: int | None
    total_output: int | None
    total_cost: float | None


@dataclass(frozen=True, slots=True)
class TopSession(Record):
    """A session ranked by its input + output tokens."""

    id: str
    title: str | None
    model: str | None
    total_tokens: int | None
    estimated_cost_usd: float | None
