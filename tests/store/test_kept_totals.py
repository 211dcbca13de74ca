"""Revision 0011: totals kept by triggers, and the listing's index of root sessions.

The reference is always the exact aggregate over the same file, computed
here with plain ``sqlite3``; other programs write the file with plain
``sqlite3`` too (the triggers must keep the totals for them). A total the
store may not trust must not be read: the store then answers the exact way.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.layout import (
    ROOTS_LISTING_INDEX,
    ROOTS_SOURCE_LISTING_INDEX,
    TOTALS_OBJECTS,
)
from hermes_store.backends.sqlite.layout import detect
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import downgrade, upgrade
from hermes_store.schema.state import SchemaState
from hermes_store.schema.totals import totals_problems
from hermes_store.tools.check import check
from tests.support.revision_steps import schema_rows, step

pytestmark = pytest.mark.sqlite_only("revision 0011's totals are SQLite triggers")

ROOT_INDEXES = (ROOTS_LISTING_INDEX, ROOTS_SOURCE_LISTING_INDEX)
MODELS = ["gpt-a", "claude-b", "local-c", None]
_EXACT_USAGE = """
    SELECT model, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(estimated_cost_usd)
    FROM sessions WHERE model IS NOT NULL GROUP BY model
"""


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _exact(path: Path) -> tuple[int, dict[str, tuple[Any, ...]]]:
    with _raw(path) as raw:
        (count,) = raw.execute("SELECT COUNT(*) FROM messages").fetchone()
        usage = {row[0]: tuple(row[1:]) for row in raw.execute(_EXACT_USAGE)}
    return count, usage


def _reported(db: SessionDB) -> tuple[int, dict[str, tuple[Any, ...]]]:
    usage = {
        row["model"]: (
            row["session_count"],
            row["total_input"],
            row["total_output"],
            row["total_cost"],
        )
        for row in db.token_usage_by_model()
    }
    return db.message_count(), usage


def _assert_exact(path: Path, db: SessionDB) -> None:
    """The store's answers are the exact aggregates (costs to the last few bits)."""
    count, usage = _exact(path)
    got_count, got_usage = _reported(db)
    assert got_count == count
    assert got_usage.keys() == usage.keys()
    for model, (n, i, o, cost) in usage.items():
        got_n, got_i, got_o, got_cost = got_usage[model]
        assert (got_n, got_i, got_o) == (n, i, o), model
        assert (got_cost is None) == (cost is None), model
        if cost is not None:
            assert math.isclose(got_cost, cost, rel_tol=1e-12, abs_tol=1e-12), model
    with _raw(path) as raw:
        assert totals_problems(raw) == []


def _kept_count(path: Path) -> int:
    with _raw(path) as raw:
        return int(raw.execute("SELECT messages FROM message_total").fetchone()[0])


def _fill(db: SessionDB, rng: random.Random, sessions: int = 12) -> None:
    for n in range(sessions):
        db.create_session(f"s{n}", rng.choice(["cli", "telegram"]), model=rng.choice(MODELS))
        db.append_messages(
            f"s{n}",
            [{"role": rng.choice(["user", "assistant"]), "content": f"m{k}"} for k in range(9)],
        )
        for _ in range(rng.randint(0, 4)):
            db.update_token_counts(
                f"s{n}",
                input_tokens=rng.randint(0, 5000),
                output_tokens=rng.randint(0, 900),
                estimated_cost_usd=rng.choice([None, rng.random() / 7]),
            )


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, SessionDB]:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    _fill(db, random.Random(11))
    return path, db


def test_0011_adds_only_its_objects_keeps_schema_version_and_downgrade_removes_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store, before, after = step(path, "0010", "0011")
    added = {(kind, name) for kind, name, _sql in after - before}
    roots = {
        ("index", "idx_sessions_roots_listing"),
        ("index", "idx_sessions_roots_source_listing"),
    }
    assert before <= after and added == TOTALS_OBJECTS | roots
    downgrade(store.engine, "0010")
    assert schema_rows(path) == before
    with _raw(path) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
    store.close()


def test_the_upgrade_back_fills_the_totals_of_rows_already_there(filled: Any) -> None:
    path, db = filled
    db.close()
    store = Store(path, migrate=False)
    downgrade(store.engine, "0010")
    rng = random.Random(3)
    with _raw(path) as raw:  # written while no trigger kept anything
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s1', 'user', ?, ?)",
            [(f"late {n}", float(n)) for n in range(40)],
        )
        raw.execute("UPDATE sessions SET model = 'gpt-a', input_tokens = 77 WHERE id = 's2'")
        raw.execute(
            "INSERT INTO sessions (id, source, started_at, model, estimated_cost_usd) "
            "VALUES ('x', 'cli', 1.0, 'new-model', ?)",
            (rng.random(),),
        )
    upgrade(store.engine, "0011")
    store.close()
    with SessionDB(path) as again:
        _assert_exact(path, again)
        assert _kept_count(path) == again.message_count()


def test_totals_stay_exact_whoever_writes_the_file(filled: Any) -> None:
    """Plain sqlite3 (another program): inserts, updates, deletes, models changed and cleared."""
    path, db = filled
    rng = random.Random(5)
    with _raw(path) as raw:
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            [(f"s{rng.randrange(12)}", f"other {n}", float(n)) for n in range(50)],
        )
        raw.execute("DELETE FROM messages WHERE id % 7 = 0")
        raw.execute("UPDATE messages SET content = 'edited', session_id = 's0' WHERE id % 5 = 0")
        raw.execute(
            "INSERT INTO sessions (id, source, started_at, model, input_tokens, output_tokens) "
            "VALUES ('p1', 'cli', 2.0, 'gpt-a', NULL, 3), ('p2', 'cli', 3.0, NULL, 4, 4)"
        )
        raw.execute("UPDATE sessions SET model = 'claude-b' WHERE id = 'p1'")  # moves model
        raw.execute("UPDATE sessions SET model = 'gpt-a' WHERE id = 'p2'")  # gets its first
        raw.execute("UPDATE sessions SET model = NULL WHERE id = 's3'")  # loses its model
        raw.execute("UPDATE sessions SET estimated_cost_usd = NULL WHERE id = 's4'")
        raw.execute("UPDATE sessions SET input_tokens = input_tokens + 1000000000000")
        raw.execute("DELETE FROM sessions WHERE id = 'p2'")
    _assert_exact(path, db)
    # and through the store: usage reports, a model given once, clear, delete, prune
    db.create_session("late", "cli")
    db.update_token_counts("late", input_tokens=5, model="fresh", estimated_cost_usd=0.1)
    db.update_token_counts("late", input_tokens=5, estimated_cost_usd=0.2)
    db.update_token_counts("s5", input_tokens=9, absolute=True)
    _assert_exact(path, db)
    db.clear_messages("s6")
    db.delete_session("s7")
    for n in range(8, 12):
        db.end_session(f"s{n}", "done")
    with _raw(path) as raw:
        raw.execute("UPDATE sessions SET started_at = 1.0 WHERE id IN ('s8', 's9', 's10')")
    assert db.prune_sessions(older_than_days=1) == 3
    _assert_exact(path, db)
    db.close()


def test_a_total_whose_trigger_is_gone_or_changed_is_not_read(filled: Any) -> None:
    """The agent's code may rebuild a table (its triggers go); a user may change one."""
    path, db = filled
    with _raw(path) as raw:
        raw.execute("DROP TRIGGER message_total_delete")
        raw.execute("DELETE FROM messages WHERE id < 20")  # the kept count no longer moves
        sql = raw.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'model_usage_totals_update'"
        ).fetchone()[0]
        raw.execute("DROP TRIGGER model_usage_totals_update")
        raw.execute(sql.replace("input_sum = input_sum +", "input_sum = input_sum + 1 +"))
        raw.execute("UPDATE sessions SET input_tokens = 1 WHERE model IS NOT NULL")
        assert _kept_count(path) != raw.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    count, usage = _exact(path)
    got_count, got_usage = _reported(db)
    assert got_count == count
    assert {model: row[:3] for model, row in got_usage.items()} == {
        model: row[:3] for model, row in usage.items()
    }
    # a check judges only totals the file keeps: these are not kept any more, so not wrong
    assert check(db.store).totals == []
    db.close()


def test_a_head_file_whose_totals_were_removed_is_counted_exactly(filled: Any) -> None:
    """Tables and triggers dropped by hand: the store does not fail, it counts."""
    from hermes_store.schema.totals import TABLES, TRIGGERS

    path, db = filled
    with _raw(path) as raw:
        for name in TRIGGERS:
            raw.execute(f"DROP TRIGGER {name}")
        for name in TABLES:
            raw.execute(f"DROP TABLE {name}")
        raw.execute("DELETE FROM messages WHERE id % 4 = 0")
    assert _reported(db) == _exact(path)
    assert check(db.store).totals == []  # (the session counters are another matter)
    db.close()


def test_a_file_the_agents_code_moved_on_counts_as_the_agent_does(filled: Any) -> None:
    """Agent v12+: rows it rewound are ``active = 0``; the whole file's count is every row,
    as the agent's own ``message_count()`` says (and the kept total), a session's its live rows."""
    path, db = filled
    db.close()
    with _raw(path) as raw:
        raw.execute("ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1")
        raw.execute("UPDATE messages SET active = 0 WHERE id % 3 = 0")
        raw.execute("UPDATE schema_version SET version = 12")
        (live,) = raw.execute("SELECT COUNT(*) FROM messages WHERE active = 1").fetchone()
        (every,) = raw.execute("SELECT COUNT(*) FROM messages").fetchone()
        session, live_in_session = raw.execute(
            "SELECT session_id, SUM(active) FROM messages GROUP BY session_id "
            "HAVING SUM(active) < COUNT(*) LIMIT 1"
        ).fetchone()
        assert _kept_count(path) == every > live
    with SessionDB(path) as agents:
        assert agents.message_count() == every
        assert agents.message_count(session) == live_in_session
        usage = _reported(agents)[1]
    exact = _exact(path)[1]
    assert {m: row[:3] for m, row in usage.items()} == {m: row[:3] for m, row in exact.items()}
    for model, row in exact.items():
        assert row[3] == usage[model][3] or math.isclose(row[3], usage[model][3], rel_tol=1e-12)


def test_check_reports_a_wrong_total_and_repair_rebuilds_it(filled: Any) -> None:
    path, db = filled
    with _raw(path) as raw:
        raw.execute("UPDATE message_total SET messages = messages + 3")
        raw.execute("UPDATE model_usage_totals SET input_sum = input_sum - 1")
        raw.execute("DELETE FROM model_usage_totals WHERE model = 'gpt-a'")
    report = check(db.store)
    assert not report.ok and len(report.totals) >= 2
    assert any("message_total" in line for line in report.totals)
    assert any("'gpt-a' missing" in line for line in report.totals)
    repaired = check(db.store, repair=True)
    assert repaired.repaired_totals and repaired.ok
    assert check(db.store).ok
    _assert_exact(path, db)
    db.close()


def test_recovery_and_copy_leave_the_totals_right(filled: Any, tmp_path: Path) -> None:
    """Recovery bulk-loads with the insert triggers off; a copy inserts with them on."""
    from hermes_store.tools.copy import copy_store
    from hermes_store.tools.recovery.recover import recover

    path, db = filled
    db.close()
    recovered = tmp_path / "recovered.db"
    recover(path, recovered)
    copied = tmp_path / "copied.db"
    copy_store(path, copied, batch_size=5)
    for target in (recovered, copied):
        with SessionDB(target) as again:
            assert _exact(target) == _exact(path)
            _assert_exact(target, again)


def test_a_file_without_the_totals_is_read_exactly(filled: Any) -> None:
    """A file at 0010 opened read-only (not migrated) has no totals: exact aggregates."""
    path, db = filled
    db.close()
    store = Store(path, migrate=False)
    downgrade(store.engine, "0010")
    store.close()
    with _raw(path) as raw:
        raw.execute("DELETE FROM messages WHERE id % 3 = 0")
        layout = detect(raw, SchemaState(6, "0010"))
    assert not layout.kept_totals and not layout.roots_listing
    with SessionDB(path, read_only=True) as old:
        assert _reported(old) == _exact(path)


# ----------------------------------------------------------------------
# the listing's partial indexes of roots
# ----------------------------------------------------------------------
def _listing_cases(roots: int, sessions: int) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for offset in sorted({0, 1, 7, roots // 2, max(0, roots - 5), roots, roots + 3}):
        cases.append({"offset": offset})
        cases.append({"offset": offset, "source": "telegram"})
        cases.append({"offset": offset, "exclude_sources": ["cron"]})
        cases.append({"offset": offset, "source": "cli", "exclude_sources": ["cron"]})
        cases.append({"offset": offset, "project_compression_tips": False})
    # every session: a page past the middle is counted from the oldest end
    for offset in sorted({0, 5, sessions // 2, sessions // 2 + 1, sessions - 7, sessions - 6}):
        for limit in (6, 1, 0):
            cases.append({"offset": offset, "include_children": True, "limit": limit})
    for offset in (sessions - 4, sessions - 1, sessions, sessions + 3):
        cases.append({"offset": offset, "include_children": True})
        cases.append({"offset": offset, "include_children": True, "exclude_sources": ["cron"]})
    return cases


def test_listing_pages_are_the_same_with_the_roots_index(tmp_path: Path) -> None:
    """Every page at every offset, ties on started_at included, as before revision 0011.

    Pages of every session past the middle are read from the oldest end; the
    file at 0010 (read-only, not migrated) reads every page the old way.
    """
    path = tmp_path / "state.db"
    SessionDB(path).close()
    rng = random.Random(8)
    rows = []
    for n in range(400):
        parent = f"r{rng.randrange(n)}" if n and rng.random() < 0.3 else None
        ended = float(rng.randrange(40)) if rng.random() < 0.5 else None
        reason = "compression" if ended is not None and rng.random() < 0.5 else None
        rows.append(
            (
                f"r{n}",
                rng.choice(["cli", "telegram", "cron"]),
                parent,
                float(rng.randrange(40)),  # many ties
                ended,
                reason,
            )
        )
    with _raw(path) as raw:
        raw.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, started_at, ended_at, "
            "end_reason) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            [(f"r{rng.randrange(400)}", f"hello {k}", float(k)) for k in range(600)],
        )
        roots = raw.execute(
            "SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NULL"
        ).fetchone()[0]
        plan = raw.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions INDEXED BY idx_sessions_roots_listing "
            "WHERE parent_session_id IS NULL ORDER BY started_at DESC LIMIT 5 OFFSET 9"
        ).fetchall()
    assert any("COVERING INDEX idx_sessions_roots_listing" in row[-1] for row in plan)
    cases = _listing_cases(roots, len(rows))
    with SessionDB(path, read_only=True) as db:
        now = [db.list_sessions_rich(**{"limit": 6, **case}) for case in cases]
    # a file at head whose listing indexes were dropped by hand: pages still (of the same
    # sizes; ties on started_at fall in another order without the index that ordered them)
    bare = tmp_path / "bare.db"
    source, copy = _raw(path), _raw(bare)
    source.backup(copy)  # the WAL's pages included
    source.close()
    copy.close()
    with _raw(bare) as raw:
        for name in (*ROOT_INDEXES, "idx_sessions_listing"):
            raw.execute(f"DROP INDEX {name}")
    with SessionDB(bare) as db:
        unindexed = [db.list_sessions_rich(**{"limit": 6, **case}) for case in cases]
    store = Store(path, migrate=False)
    downgrade(store.engine, "0010")
    store.close()
    with SessionDB(path, read_only=True) as db:
        before = [db.list_sessions_rich(**{"limit": 6, **case}) for case in cases]
    assert now == before
    assert [len(page) for page in unindexed] == [len(page) for page in now]
    assert any(page for page in now)
