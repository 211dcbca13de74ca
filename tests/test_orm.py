"""The ORM side of the store: the mapped classes' JSON values.

Values the database holds are read back with plain SQL on a unit's
connection, never through the mapped classes under test.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from hermes_store import SessionDB, Store
from hermes_store.schema.models import Message, Session


def raw(store: Store, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Rows of ``sql`` in a read unit of their own (no mapped class involved)."""
    with store.read() as uow:
        return [dict(row) for row in uow.connection.execute(text(sql), params).mappings()]


def test_mapped_json_columns_read_python_values_and_the_ddl_stays_text(db: SessionDB) -> None:
    db.create_session("s1", source="cli", model_config={"temperature": 0.2})
    db.append_message("s1", role="assistant", tool_calls=[{"id": "c1"}])
    stored = raw(db.store, "SELECT tool_calls FROM messages")
    assert stored == [{"tool_calls": '[{"id": "c1"}]'}]
    with db.store.read() as uow:
        calls = uow.connection.execute(select(Message.tool_calls)).scalar_one()
        config = uow.connection.execute(select(Session.model_config)).scalar_one()
    assert calls == [{"id": "c1"}]
    assert config == {"temperature": 0.2}
    assert str(Message.__table__.c.tool_calls.type) == "TEXT"


def test_regression_batch_append_binds_json_as_stored_text(db: SessionDB) -> None:
    """The batch INSERT bound through the mapped column's type: JSON came back as a string."""
    db.create_session("s1", source="cli")
    db.append_messages(
        "s1",
        [
            {"role": "assistant", "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "ok", "reasoning_details": {"a": 1}},
        ],
    )
    first, second = db.get_messages("s1")
    assert first["tool_calls"] == [{"id": "c1"}]
    assert second["reasoning_details"] == {"a": 1}


def test_salvage_checks_json_columns_as_the_text_they_are_stored_as() -> None:
    from hermes_store.schema.models import messages_table
    from hermes_store.tools.recovery.salvage import _Shape

    shape = _Shape(messages_table, [c.name for c in messages_table.columns], "id")
    kinds = {name: kind for name, kind, _required in shape.kinds}
    assert kinds["tool_calls"] == kinds["content"] == "text"
