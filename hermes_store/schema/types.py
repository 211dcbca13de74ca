"""Column types of the mapped classes: JSON values over the document's TEXT columns.

The design document stores ``model_config``, ``tool_calls``,
``reasoning_details`` and ``codex_reasoning_items`` as ``TEXT`` holding JSON,
and the old code (and the agent's) read them that way; the DDL must stay so.
An ORM entity, though, should carry the Python value, not a string to decode
by hand. :class:`JSONText` is a ``TypeDecorator`` over ``Text``: the DDL, the
migrations and Alembic's comparison see plain ``TEXT``, while values bound
and read through the mapped classes are encoded and decoded by the store's
own rules (:func:`~hermes_store.domain.arguments.json_arg` and
:func:`~hermes_store.domain.arguments.decode_json`), so an entity written
through the ORM reads back through ``SessionDB.get_messages`` as the same
value, and the other way round.

The store's own statements never bind through this type: they bind text they
have already checked and encoded, through clauses typed with
:func:`~hermes_store.backends.shapes.storage_type` (plain ``Text``), so no
value is encoded twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from hermes_store.domain.arguments import decode_json, json_arg


class JSONText(TypeDecorator[Any]):
    """JSON in a ``TEXT`` column: Python values in, Python values out.

    Writing: an empty value (``None``, ``[]``, ``{}``, ``""``) is stored as
    NULL, as ``SessionDB.append_message`` stores it; anything else is encoded
    with ``allow_nan=False`` (NaN is not JSON, and other readers would choke
    on it). A value that cannot be encoded raises
    :class:`~hermes_store.errors.InvalidInputError` naming ``column``.

    Reading: JSON text is decoded; text that is not JSON (another program may
    have written it) comes back as the text it is, never as an error.
    """

    impl = Text
    cache_ok = True

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column
        """``table.column``, for the error a value that is not JSON raises."""

    def encode(self, value: Any) -> str | None:
        """The text stored for ``value`` (None for an empty one), or InvalidInputError."""
        return json_arg(self.column, value)

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return json_arg(self.column, value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return decode_json(value)

    def __repr__(self) -> str:
        return f"JSONText({self.column!r})"
