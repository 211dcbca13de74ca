"""Copying a state.db into PostgreSQL (and back), or into another file: complete, idempotent,
verified, and refused before anything is written when the target holds other data.

Real databases on both sides: a SQLite file under tmp_path, and as the target
either another file or a brand-new PostgreSQL database per test
(``pg_fresh_url``; the ``[sqlite]``/``[postgresql]`` variants). "The same
store" is checked through ``export_all``: every session column and every
message, ids included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.copy import CopyError, copy_store
from tests.support.paths import REPO


def _seed(path: Path) -> None:
    """Lineage whose children sort before their parents, tool calls, costs, CJK, gaps in ids."""
    with SessionDB(path) as db:
        db.create_session("z_root", "cli", model="m1", model_config={"t": 0.2}, system_prompt="sp")
        db.create_session("m_child", "telegram", parent_session_id="z_root")
        db.create_session("a_grandchild", "cli", parent_session_id="m_child")
        db.create_session("lonely", "discord")
        db.set_session_title("z_root", "Fix Docker Build")
        db.set_session_title("m_child", "Fix Docker Build #2")
        for i in range(23):
            session = ("z_root", "m_child", "a_grandchild")[i % 3]
            db.append_message(
                session,
                "assistant" if i % 2 else "user",
                f"message {i} about docker 记忆断裂",
                tool_calls=[{"id": f"c{i}"}, {"id": f"d{i}"}] if i % 4 == 0 else None,
                reasoning="because" if i % 5 == 0 else None,
                token_count=i,
            )
        doomed = db.append_message("lonely", "user", "deleted later")
        db.append_messages("lonely", [{"role": "user", "content": "kept"}])
        db.update_token_counts("z_root", input_tokens=120, output_tokens=7, estimated_cost_usd=0.5)
        db.end_session("m_child", "compressed")
        with db.store.write() as uow:  # a gap in the ids, as deletions leave in real files
            uow.connection.execute(text("DELETE FROM messages WHERE id = :id"), {"id": doomed})
            uow.connection.execute(
                text("UPDATE sessions SET message_count = message_count - 1 WHERE id = 'lonely'")
            )


def _everything(target: Any) -> list[dict[str, Any]]:
    with SessionDB(target) as db:
        return sorted(db.export_all(), key=lambda s: s["id"])


@pytest.fixture
def new_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Make an empty target store on the test's backend: a new file, or a new database."""
    if backend == "postgresql":
        return request.getfixturevalue("pg_fresh_url")
    made = iter(range(1000))
    return lambda: tmp_path / f"target-{next(made)}.db"


def test_copy_is_complete_and_idempotent(tmp_path: Path, new_target: Any) -> None:
    source = tmp_path / "state.db"
    _seed(source)
    target = new_target()
    phases: list[tuple[str, int, int]] = []

    report = copy_store(source, target, batch_size=4, progress=lambda *p: phases.append(p))

    assert (report.sessions_total, report.messages_total) == (4, 24)
    assert (report.sessions_copied, report.messages_copied, report.parents_linked) == (4, 24, 2)
    assert _everything(target) == _everything(source)
    assert ("messages", 24, 24) in phases and ("sessions", 4, 4) in phases
    again = copy_store(source, target, batch_size=4)
    assert (again.sessions_copied, again.messages_copied, again.parents_linked) == (0, 0, 0)
    assert _everything(target) == _everything(source)
    with SessionDB(target) as db:
        assert db.get_ancestors("a_grandchild")[-1]["id"] == "z_root"
        assert [h["session_id"] for h in db.search_messages("deleted")] == []
        new_id = db.append_message("lonely", "user", "after the copy")
        assert new_id > max(m["id"] for s in _everything(source) for m in s["messages"])


def test_copy_keeps_archived_and_pinned(tmp_path: Path, new_target: Any) -> None:
    """Before, the flags were left behind: every copied session came out listed and unpinned."""
    source = tmp_path / "state.db"
    _seed(source)
    with SessionDB(source) as db:
        db.set_session_archived("z_root", True)  # the whole chain
        db.set_session_pinned("lonely", True)
    target = new_target()
    copy_store(source, target, batch_size=2)
    assert _everything(target) == _everything(source)
    flags = {s["id"]: (s["archived"], s["pinned"]) for s in _everything(target)}
    assert flags["z_root"] == (1, 0) and flags["lonely"] == (0, 1)


def test_a_bad_batch_size_is_a_named_error_before_anything_is_opened(tmp_path: Path) -> None:
    """Before, a string or None failed on a comparison (TypeError), 2.5 on the source's
    LIMIT, and a size past 64 bits escaped as OverflowError (a traceback from the CLI),
    after the target had been created."""
    from hermes_store import InvalidInputError

    source = tmp_path / "state.db"
    _seed(source)
    target = tmp_path / "target.db"
    bad_sizes: list[Any] = ["3", 2.5, None, True, 0, 2**64]
    for bad in bad_sizes:
        with pytest.raises(InvalidInputError, match="batch_size"):
            copy_store(source, target, batch_size=bad)
    assert not target.exists()
    done = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "copy", "--from", str(source)]
        + ["--to", str(target), "--batch-size", str(2**64)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: batch_size must fit in 64 bits")
    assert not target.exists()


def test_copy_back_from_postgresql_to_sqlite_gives_the_same_store(
    tmp_path: Path, pg_fresh_url: Any
) -> None:
    source = tmp_path / "state.db"
    _seed(source)
    middle = pg_fresh_url()
    copy_store(source, middle)
    back = tmp_path / "back.db"
    copy_store(middle, back)
    assert _everything(back) == _everything(source)
    with SessionDB(back) as db:  # the SQLite triggers indexed the copied rows
        assert len(db.search_messages("docker", limit=100)) == 23


def _other_messages_under_ids_1_and_2(db: SessionDB) -> None:
    db.create_session("elsewhere", "cli")
    db.append_messages("elsewhere", [{"role": "user", "content": "x"}] * 2)


def _another_session_under_a_source_id(db: SessionDB) -> None:
    db.create_session("lonely", "telegram")  # same id, another conversation


def _a_source_title_on_another_session(db: SessionDB) -> None:
    db.create_session("other", "cli")
    db.set_session_title("other", "Fix Docker Build")


@pytest.mark.parametrize(
    ("clash", "named"),
    [
        (_other_messages_under_ids_1_and_2, r"2 message\(s\).*ids 1, 2"),
        (_another_session_under_a_source_id, r"1 session\(s\).*lonely"),
        (_a_source_title_on_another_session, r"1 title\(s\).*z_root"),
    ],
)
def test_copy_refuses_a_target_holding_other_data_under_the_sources_ids_before_copying(
    tmp_path: Path, new_target: Any, clash: Any, named: str
) -> None:
    """Before, the copy half-merged and only then failed ("verification failed ... (81 vs 72)")."""
    source = tmp_path / "state.db"
    _seed(source)
    target = new_target()
    with SessionDB(target) as db:
        clash(db)
    before = _everything(target)
    with pytest.raises(CopyError, match=named + ".*nothing was copied"):
        copy_store(source, target)
    assert _everything(target) == before


def test_copy_leaves_a_parent_link_the_target_already_has(tmp_path: Path, new_target: Any) -> None:
    """A copied session whose parent was set in the target since is not re-parented."""
    source = tmp_path / "state.db"
    _seed(source)
    target = new_target()
    copy_store(source, target)
    with SessionDB(target) as db, db.store.write() as uow:
        uow.connection.execute(
            text("UPDATE sessions SET parent_session_id = 'lonely' WHERE id = 'm_child'")
        )
    copy_store(source, target)
    with SessionDB(target) as db:
        assert db.get_session("m_child")["parent_session_id"] == "lonely"
        assert db.get_session("a_grandchild")["parent_session_id"] == "m_child"


def test_copy_refuses_a_source_with_messages_of_no_session(tmp_path: Path, new_target: Any) -> None:
    source = tmp_path / "state.db"
    _seed(source)
    raw = sqlite3.connect(source)  # foreign keys are off on a plain connection, as in old code
    raw.execute("INSERT INTO messages (session_id, role, timestamp) VALUES ('gone', 'user', 1.0)")
    raw.commit()
    raw.close()
    target = new_target()
    with pytest.raises(CopyError, match="1 message.*belong to no session"):
        copy_store(source, target)
    with SessionDB(target) as db:
        assert (db.session_count(), db.message_count()) == (0, 0)


def test_copy_refuses_copying_a_store_onto_itself(tmp_path: Path) -> None:
    source = tmp_path / "state.db"
    _seed(source)
    with pytest.raises(CopyError, match="same database"):
        copy_store(source, f"sqlite:///{source}")


def test_cli_copy_reports_and_verifies(tmp_path: Path, new_target: Any) -> None:
    source = tmp_path / "state.db"
    _seed(source)
    made = new_target()
    target = made.render_as_string(hide_password=False) if isinstance(made, URL) else str(made)
    env = {
        **os.environ,
        "HERMES_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
    }
    command = [sys.executable, "-m", "hermes_store.cli", "copy", "--from", str(source)]
    first = subprocess.run([*command, "--to", target], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert "copied 4 of 4 session(s) and 24 of 24 message(s)" in first.stdout
    assert "verified" in first.stdout
    assert "there already" not in first.stdout, "nothing was there already"
    second = subprocess.run([*command, "--to", target], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    assert "copied 0 of 4 session(s) and 0 of 24 message(s)" in second.stdout
    assert "the rest were there already" in second.stdout
    missing = subprocess.run(
        [*command[:-1], str(tmp_path / "nope.db"), "--to", target],
        capture_output=True,
        text=True,
        env=env,
    )
    assert missing.returncode == 1
    assert "no database at" in missing.stderr
    assert _everything(target) == _everything(source)


def test_copy_from_a_file_of_the_agents_v25_to_postgresql(
    tmp_path: Path, pg_fresh_url: Any
) -> None:
    """The agent's v25 layout (prompts by hash, active flags) travels as documented rows."""
    from tests.support.upstream_schema import build_upstream_db

    source = build_upstream_db(tmp_path / "agent.db", 25)
    url = pg_fresh_url()
    report = copy_store(source, url)
    assert (report.sessions_copied, report.messages_copied) == (3, 6)
    with SessionDB(url) as copied:
        assert copied.get_session("up_root")["system_prompt"] == "You are Hermes."
        assert {h["session_id"] for h in copied.search_messages("docker")} == {"up_root"}
        assert [m["role"] for m in copied.get_messages("up_root")] == ["user", "assistant", "tool"]
    assert _everything(url) == _everything(source)
