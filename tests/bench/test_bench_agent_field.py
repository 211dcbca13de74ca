"""The field-size count row pours a corpus into the agent's layouts whole, triggers and all.

``bench.field.agent_count`` measures ``message_count()`` on agent-layout files
filled from the field corpus with plain SQL; a fill that lost rows, kept
the agent's triggers dropped, or left a layout the store reads as another
would measure the wrong file. Here the corpus is a small file of ours.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.field.agent_count import fill, measure
from bench.micro.agent_layouts import agent_template
from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3


def _corpus(path: Path) -> Path:
    db = SessionDB(path)
    for number in range(3):
        db.create_session(f"s{number}", "cli")
        for index in range(10):
            db.append_message(f"s{number}", "user", content=f"message {index} of s{number}")
    db.close()
    return path


def _messages_triggers(path: Path) -> list[tuple[str, str]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages' "
            "ORDER BY name"
        ).fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("version", [10, 25])
def test_fill_keeps_every_row_and_the_agents_triggers(tmp_path: Path, version: int) -> None:
    corpus = _corpus(tmp_path / "corpus.db")
    filled = fill(corpus, version, tmp_path / f"agent-v{version}.db")
    template = agent_template(tmp_path, version)
    assert _messages_triggers(filled) == _messages_triggers(template) != []
    connection = sqlite3.connect(filled)
    try:
        assert connection.execute("SELECT COUNT(*) FROM messages").fetchone() == (30,)
        assert connection.execute("SELECT COUNT(*) FROM sessions").fetchone() == (3,)
        (version_now,) = connection.execute("SELECT MAX(version) FROM schema_version").fetchone()
        inactive = (
            connection.execute("SELECT COUNT(*) FROM messages WHERE active = 0").fetchone()[0]
            if version >= 25
            else 0
        )
    finally:
        connection.close()
    assert version_now == version
    assert inactive == (3 if version >= 25 else 0)
    db = SessionDB(filled)
    try:
        assert db.message_count() == 30  # every row, as the agent counts
        assert db.message_count("s1") == (9 if version >= 25 else 10)  # live rows
    finally:
        db.close()


def test_measure_counts_the_same_on_both_sides(tmp_path: Path) -> None:
    filled = fill(_corpus(tmp_path / "corpus.db"), 25, tmp_path / "agent-v25.db")
    row = measure(filled, reps=2, calls=2)
    assert row["messages"] == 30
    assert row["store_ms"] > 0 and row["agent_ms"] > 0
