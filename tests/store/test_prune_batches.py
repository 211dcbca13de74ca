"""Pruning in batches (hermes_store.uow.pruning): the same result, and room for other writers.

A prune in many short write transactions must delete exactly what one
transaction deletes (the same sessions, their messages, the same orphaned
children), leave the counters and both FTS indexes whole, and let another
process commit between its batches. The last is shown by the data itself: a
worker process splits a session off one the prune has planned but not yet
reached; its create needs the parent to exist, and the prune's later batch
then orphans the new session.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.uow import pruning
from hermes_store.uow.pruning import prune_in_batches
from tests.support.paths import SUPPORT

NOW = 1_796_000_000.0
DAY = 86_400.0
WORKER = SUPPORT / "store_worker.py"


def _build(path: Path) -> None:
    """Sessions of every kind around a 30-day cutoff, with messages to search."""
    clock = {"now": NOW - 60 * DAY}
    db = SessionDB(path, clock=lambda: clock["now"])
    try:
        for number in range(48):
            clock["now"] = NOW - (60 - number) * DAY  # one a day, from 60 days ago
            session_id = f"s{number:02d}"
            parent = f"s{number - 1:02d}" if number % 5 == 4 else None
            db.create_session(
                session_id,
                "telegram" if number % 3 == 0 else "cli",
                model="m",
                parent_session_id=parent,
            )
            db.append_messages(
                session_id,
                [
                    {"role": "user", "content": f"nebula question {number} 服务端部署"},
                    {
                        "role": "assistant",
                        "content": f"answer {number}",
                        "tool_calls": [{"id": f"c{number}", "function": {"name": "f"}}],
                    },
                    {"role": "tool", "content": f"nebula output {number}", "tool_call_id": "c"},
                ],
            )
            if number % 7 != 6:  # every seventh stays open
                db.end_session(session_id, "done")
    finally:
        db.close()


def _contents(path: Path) -> dict[str, Any]:
    connection = sqlite3.connect(path)
    try:
        for name in ("messages_fts", "messages_fts_trigram"):  # raises if an index disagrees
            connection.execute(f"INSERT INTO {name}({name}, rank) VALUES ('integrity-check', 1)")
        return {
            "sessions": connection.execute("SELECT * FROM sessions ORDER BY id").fetchall(),
            "messages": connection.execute("SELECT * FROM messages ORDER BY id").fetchall(),
            "word hits": connection.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'nebula' ORDER BY rowid"
            ).fetchall(),
            "trigram hits": connection.execute(
                "SELECT rowid FROM messages_fts_trigram WHERE messages_fts_trigram MATCH '服务端' "
                "ORDER BY rowid"
            ).fetchall(),
            "miscounted": connection.execute(
                "SELECT id FROM sessions s WHERE message_count != "
                "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)"
            ).fetchall(),
        }
    finally:
        connection.close()


def _pruned_in_one_transaction(tmp_path: Path) -> tuple[Path, Path, Path, int]:
    """The built file, a copy pruned in one transaction, an unpruned copy, and the count."""
    original = tmp_path / "original.db"
    _build(original)
    one, batched = tmp_path / "one.db", tmp_path / "batched.db"
    shutil.copy(original, one)
    shutil.copy(original, batched)
    store = Store(one, clock=lambda: NOW)
    try:
        in_one = store.transact(lambda uow: uow.sessions.prune(30, None))
    finally:
        store.close()
    return original, one, batched, in_one


def test_batches_delete_exactly_what_one_transaction_deletes(tmp_path: Path) -> None:
    original, one, batched, in_one = _pruned_in_one_transaction(tmp_path)
    progress: list[tuple[int, int]] = []
    store = Store(batched, clock=lambda: NOW)
    try:
        in_batches = prune_in_batches(
            store, 30, None, first_budget=3, pause_s=0, after_batch=lambda *p: progress.append(p)
        )
    finally:
        store.close()

    assert in_one == in_batches > 20
    assert len(progress) > 3  # it did run in batches
    assert progress[-1] == (in_batches, 0)
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
    pruned, kept = _contents(one), _contents(batched)
    assert pruned == kept
    assert kept["miscounted"] == []
    before = _contents(original)
    assert len(kept["sessions"]) == len(before["sessions"]) - in_batches
    assert len(kept["word hits"]) < len(before["word hits"])


def test_the_facade_prunes_in_batches_with_the_same_count(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _build(path)
    with SessionDB(path, clock=lambda: NOW) as db:
        assert db.prune_sessions(older_than_days=30, source="telegram") == 8
        assert db.prune_sessions(older_than_days=30) == 18
        assert db.prune_sessions(older_than_days=30) == 0
        remaining = {s["id"] for s in db.list_sessions_rich(limit=100, include_children=True)}
    assert _contents(path)["miscounted"] == []
    assert "s00" not in remaining and "s06" in remaining  # s06 was never ended


def test_another_process_commits_between_batches(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _build(path)
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    replies: list[dict[str, Any]] = []
    store = Store(path, clock=lambda: NOW)
    try:
        assert json.loads(worker.stdout.readline()) == {"ok": "ready"}
        with store.read() as uow:
            _params, plan = uow.sessions.prune_plan(30, None)
        last_planned = plan[-1][0]

        def after_batch(done: int, remaining: int) -> None:
            if replies or remaining == 0:
                return
            # The prune has committed a batch and holds no lock: the worker's write
            # goes through, splitting a session off one the prune has yet to delete.
            worker.stdin.write(f"branch written_meanwhile {last_planned}\n")
            worker.stdin.flush()
            replies.append(json.loads(worker.stdout.readline()))

        deleted = prune_in_batches(store, 30, None, first_budget=3, after_batch=after_batch)
        worker.stdin.write("quit\n")
        worker.stdin.flush()
        assert worker.wait(timeout=60) == 0
    finally:
        store.close()
        if worker.poll() is None:
            worker.kill()
    assert "ok" in replies[0], replies
    assert deleted == len(plan)
    with SessionDB(path) as db:
        assert db.get_session(last_planned) is None  # a later batch deleted the parent ...
        child = db.get_session("written_meanwhile")
        assert child is not None and child["parent_session_id"] is None  # ... orphaning it
        assert [m["content"] for m in db.get_messages("written_meanwhile")] == [
            "written between two batches"
        ]


def test_a_session_bigger_than_a_batch_is_emptied_in_slices_its_counters_following(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path, clock=lambda: NOW - 40 * DAY) as db:
        for session_id in ("big", "resumed"):
            db.create_session(session_id, "cli")
            db.append_messages(
                session_id,
                [
                    {
                        "role": "assistant",
                        "content": f"nebula step {n}",
                        "tool_calls": [{"id": f"c{n}"}, {"id": f"d{n}"}] if n % 3 == 0 else None,
                    }
                    for n in range(60)
                ],
            )
            db.end_session(session_id, "done")
    store = Store(path, clock=lambda: NOW)
    try:
        with store.read() as uow:
            params, plan = uow.sessions.prune_plan(30, None)
        assert sorted(plan) == [("big", 60), ("resumed", 60)]

        assert store.transact(lambda uow: uow.sessions.prune_slice("big", params, 25)) == 25
        assert _contents(path)["miscounted"] == []  # message_count is 35 now, and right
        with SessionDB(path) as db:
            big = db.get_session("big")
            assert big is not None and big["message_count"] == 35
            assert big["tool_call_count"] == 2 * len([n for n in range(25, 60) if n % 3 == 0])
            assert db.get_messages("big")[0]["content"] == "nebula step 25"  # oldest went first

        assert store.transact(lambda uow: uow.sessions.prune_slice("resumed", params, 10)) == 10
        with SessionDB(path, clock=lambda: NOW) as db:
            db.reopen_session("resumed")  # no longer prunable: the next slice leaves it
        assert store.transact(lambda uow: uow.sessions.prune_slice("resumed", params, 10)) == 0

        assert prune_in_batches(store, 30, None, first_budget=20, pause_s=0) == 1
    finally:
        store.close()
    kept = _contents(path)  # FTS integrity-checked in there
    assert kept["miscounted"] == []
    assert [row[0] for row in kept["sessions"]] == ["resumed"]
    assert len(kept["messages"]) == 50


def test_batches_are_sized_by_the_text_they_delete(tmp_path: Path) -> None:
    """A session of long messages costs what its text costs, not what its count does."""
    from hermes_store.uow.pruning import COST_PER_MESSAGE, _costed, _take

    path = tmp_path / "state.db"
    with SessionDB(path, clock=lambda: NOW - 40 * DAY) as db:
        for session_id, size in (("short1", 10), ("long", 5_000), ("short2", 10), ("empty", 0)):
            db.create_session(session_id, "cli")
            if size:
                db.append_messages(
                    session_id, [{"role": "user", "content": "x" * size} for _ in range(3)]
                )
            db.end_session(session_id, "done")
    store = Store(path, clock=lambda: NOW)
    try:
        with store.read() as uow:
            _params, plan = uow.sessions.prune_plan(30, None)
            sizes = uow.sessions.text_sizes([session_id for session_id, _ in plan])
        costed = {entry[0]: entry for entry in _costed(store, plan)}
    finally:
        store.close()
    assert sizes == {"short1": (3, 30, 0), "long": (3, 15_000, 0), "short2": (3, 30, 0)}
    assert costed["long"] == ("long", 3, 15_000 + 3 * COST_PER_MESSAGE)
    assert costed["short1"] == ("short1", 3, 30 + 3 * COST_PER_MESSAGE)
    assert costed["empty"] == ("empty", 0, COST_PER_MESSAGE)
    entries = [costed[session_id] for session_id, _ in plan]
    budget = 2 * (30 + 3 * COST_PER_MESSAGE)  # two short sessions' worth: never the long one
    batches, position = [], 0
    while position < len(entries):
        batch = _take(entries, position, budget)
        batches.append(batch)
        position += len(batch)
    assert ["long"] in batches  # alone (and so emptied in slices), though it has 3 messages
    assert sum(len(batch) for batch in batches) == 4


def test_text_beyond_ascii_costs_more(tmp_path: Path) -> None:
    """A CJK character costs what unindexing it costs: its two extra UTF-8 bytes weigh in."""
    from hermes_store.uow.pruning import COST_PER_EXTRA_BYTE, COST_PER_MESSAGE, _costed

    path = tmp_path / "state.db"
    with SessionDB(path, clock=lambda: NOW - 40 * DAY) as db:
        for session_id, content in (("latin", "deploy" * 10), ("cjk", "服务端部署" * 12)):
            db.create_session(session_id, "cli")
            db.append_messages(session_id, [{"role": "user", "content": content}])
            db.end_session(session_id, "done")
    store = Store(path, clock=lambda: NOW)
    try:
        with store.read() as uow:
            plan = uow.sessions.prune_plan(30, None)[1]
            assert uow.sessions.text_sizes(["latin", "cjk"]) == {
                "latin": (1, 60, 0),
                "cjk": (1, 60, 120),
            }
        costed = {entry[0]: entry for entry in _costed(store, plan)}
    finally:
        store.close()
    assert costed["latin"] == ("latin", 1, 60 + COST_PER_MESSAGE)
    assert costed["cjk"] == ("cjk", 1, 60 + 120 * COST_PER_EXTRA_BYTE + COST_PER_MESSAGE)


def test_the_clock_cuts_a_batch_and_the_rest_go_next(tmp_path: Path) -> None:
    """A batch stops deleting once its share of the target has passed; nothing is skipped."""
    _original, one, batched, in_one = _pruned_in_one_transaction(tmp_path)
    progress: list[tuple[int, int]] = []
    store = Store(batched, clock=lambda: NOW)
    try:  # a budget for every session at once, and no time to spend: one session a batch
        in_batches = prune_in_batches(
            store,
            30,
            None,
            first_budget=10**9,
            target_s=1e-9,
            pause_s=0,
            after_batch=lambda *p: progress.append(p),
        )
    finally:
        store.close()
    assert in_one == in_batches > 20
    assert [done for done, _ in progress] == list(range(1, in_batches + 1))
    assert _contents(one) == _contents(batched)


def test_the_pause_outlasts_the_poll_gap_of_a_writer_that_waited_through_the_batch() -> None:
    """SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then 100 ms."""
    from hermes_store.uow.pruning import busy_poll_gap

    assert busy_poll_gap(0.0) == 0.001
    assert busy_poll_gap(0.020) == 0.015  # 18 ms slept so far: the 15 ms sleep is next
    assert busy_poll_gap(0.060) == 0.025
    assert busy_poll_gap(0.150) == 0.050
    assert busy_poll_gap(0.228) == 0.100
    assert busy_poll_gap(5.0) == 0.100


def _segments(path: Path) -> dict[str, int]:
    connection = sqlite3.connect(path)
    try:
        return {
            name: connection.execute(f"SELECT COUNT(DISTINCT segid) FROM {name}_idx").fetchone()[0]
            for name in ("messages_fts", "messages_fts_trigram")
        }
    finally:
        connection.close()


def test_prune_batches_keep_the_fts_segments_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch does a bounded FTS5 merge step, so segments do not pile up for others to merge."""
    from hermes_store.repositories import session_pruning

    original = tmp_path / "original.db"
    with SessionDB(original, clock=lambda: NOW - 40 * DAY) as db:
        for number in range(120):
            session_id = f"s{number:03d}"
            db.create_session(session_id, "cli")
            db.append_messages(
                session_id,
                [
                    {"role": "user", "content": f"nebula {number} 服务端部署 " * 40}
                    for _ in range(4)
                ],
            )
            db.end_session(session_id, "done")
    segments = {}
    for pages in (0, session_pruning.FTS_MERGE_PAGES):
        path = tmp_path / f"merge-{pages}.db"
        shutil.copy(original, path)
        monkeypatch.setattr(session_pruning, "FTS_MERGE_PAGES", pages)
        store = Store(path, clock=lambda: NOW)
        try:  # a tiny budget and target: one session a batch, 120 commits
            assert (
                prune_in_batches(store, 30, None, first_budget=1, target_s=1e-9, pause_s=0) == 120
            )
        finally:
            store.close()
        segments[pages] = _segments(path)
        _contents(path)  # both indexes pass FTS5's integrity-check
    merged, unmerged = segments[session_pruning.FTS_MERGE_PAGES], segments[0]
    for name in unmerged:
        assert merged[name] < unmerged[name], segments


def _old_sessions(path: Path, ended: list[str], open_: list[str]) -> None:
    """Sessions started 40 days before NOW, each with a few messages; ``ended`` ended."""
    with SessionDB(path, clock=lambda: NOW - 40 * DAY) as db:
        for session_id in [*ended, *open_]:
            db.create_session(session_id, "cli")
            db.append_messages(
                session_id, [{"role": "user", "content": f"{session_id} {n}"} for n in range(6)]
            )
        for session_id in ended:
            db.end_session(session_id, "done")


def test_sessions_ended_while_the_prune_runs_are_pruned_too(tmp_path: Path) -> None:
    """Not in the plan (still open when it was made), prunable before the prune ends: deleted."""
    path = tmp_path / "state.db"
    _old_sessions(path, ["a", "b", "c"], ["late"])
    store = Store(path, clock=lambda: NOW)
    ended: list[str] = []

    def end_late(_done: int, _remaining: int) -> None:
        if not ended:  # after the first batch, between two write transactions
            with SessionDB(path, clock=lambda: NOW - 35 * DAY) as other:
                other.end_session("late", "done")
            ended.append("late")

    try:
        deleted = prune_in_batches(store, 30, None, first_budget=1, pause_s=0, after_batch=end_late)
    finally:
        store.close()
    assert ended == ["late"]
    assert deleted == 4
    assert _contents(path)["sessions"] == []


class _SliceCountingStore(Store):
    """A real store that notes what each slice of a big session's emptying removed."""

    slices: list[int]

    def transact(self, work: Any, *, patience_s: float | None = None) -> Any:
        result = super().transact(work, patience_s=patience_s)
        if getattr(work, "func", None) is pruning._delete_slice:
            self.slices.append(result)
        return result


def test_a_big_session_is_emptied_slice_after_slice_until_a_slice_comes_up_short(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path, clock=lambda: NOW - 40 * DAY) as db:
        db.create_session("big", "cli")
        db.append_messages("big", [{"role": "user", "content": f"m {n}"} for n in range(60)])
        db.end_session("big", "done")
    store = _SliceCountingStore(path, clock=lambda: NOW)
    store.slices = []
    try:
        assert prune_in_batches(store, 30, None, first_budget=2_000, pause_s=0) == 1
    finally:
        store.close()
    assert len(store.slices) >= 3, store.slices  # several slices, the last one short
    assert sum(store.slices) == 60, store.slices  # the slices, not the batch, emptied it
    assert _contents(path)["sessions"] == []
