"""The agent-file rows' yardstick writes what the agent's append writes, and refuses what it does.

``bench.micro.agent_plain`` stands in for the agent's own store in the issue #32
rows; a replica that wrote less (a column, a counter, a guard) would make
the store look slower than it is. Its rows are compared with those of
:func:`tests.support.upstream_schema.upstream_append_message` (the reference for the
agent's append, checked against the real code) on files of each layout.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.micro.agent_plain import AgentPlainDB, CompressionRefused
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.upstream_schema import (
    build_upstream_db,
    upstream_append_message,
    upstream_create_session,
)

MESSAGES = (
    {"role": "user", "content": "deploy the api"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
    {"role": "tool", "content": "ok", "tool_name": "shell", "tool_call_id": "c1"},
    {"role": "assistant", "content": "部署完成", "finish_reason": "stop", "token_count": 12},
)


def _rows(path: Path, session_id: str) -> tuple[list[tuple[object, ...]], tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        columns = [
            row[1]
            for row in connection.execute("PRAGMA table_info(messages)")
            if row[1] not in ("id", "session_id", "timestamp")
        ]
        messages = connection.execute(
            f"SELECT {', '.join(columns)} FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
        counters = connection.execute(
            "SELECT message_count, tool_call_count FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return messages, counters
    finally:
        connection.close()


@pytest.mark.parametrize("version", [10, 11, 25])
def test_the_replica_writes_the_agents_rows_and_counters(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version, seed=False)
    for session_id in ("ref", "replica"):
        upstream_create_session(path, version, session_id, "cli")
    for message in MESSAGES:
        upstream_append_message(path, version, "ref", **message)
    db = AgentPlainDB(path)
    try:
        for message in MESSAGES:
            db.append_message("replica", **message)
        assert db.message_count() == 2 * len(MESSAGES)
        assert db.message_count("replica") == len(MESSAGES)
    finally:
        db.close()
    assert _rows(path, "replica") == _rows(path, "ref")
    assert _rows(path, "replica")[1] == (4, 2)


def test_the_replica_refuses_a_locked_or_compressed_session_as_the_agent_does(
    tmp_path: Path,
) -> None:
    path = build_upstream_db(tmp_path / "state.db", 25, seed=False)
    for session_id in ("locked", "ended", "free"):
        upstream_create_session(path, 25, session_id, "cli")
    connection = sqlite3.connect(path, isolation_level=None)
    now = time.time()
    connection.execute(
        "INSERT INTO compression_locks VALUES ('locked', 'other-process', ?, ?)", (now, now + 60)
    )
    connection.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = 'compression' WHERE id = 'ended'", (now,)
    )
    connection.close()
    db = AgentPlainDB(path)
    try:
        for session_id in ("locked", "ended"):
            with pytest.raises(CompressionRefused):
                db.append_message(session_id, "user", content="lost?")
        db.append_message("free", "user", content="kept")
        assert db.message_count() == 1
    finally:
        db.close()
