"""Shared commits: concurrent writers of one process in one transaction, each in its savepoint.

The groups are made deterministic by a first call that holds its group open
until the others are queued behind it: they then share the next transaction.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn
from hermes_store.errors import (
    SessionNotFoundError,
    StoreFullError,
    StoreLockedError,
)
from hermes_store.uow.group import SharedCommits
from hermes_store.uow.unit import UnitOfWork
from tests.support.paths import SUPPORT

pytestmark = pytest.mark.sqlite_only("shared commits are SQLite's; PostgreSQL passes through")

HOLDER = SUPPORT / "lock_holder.py"
WORKER = SUPPORT / "shared_worker.py"


def _shared(store: Store) -> SharedCommits:
    assert store.shared is not None
    return store.shared


def _released_holder(db_path: Path) -> subprocess.Popen[str]:
    """Another process holding the write lock until a line on, or the end of, its stdin."""
    return subprocess.Popen(
        [sys.executable, str(HOLDER), str(db_path), "release"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def _in_threads(calls: list[Callable[[], Any]]) -> tuple[list[Any], list[threading.Thread]]:
    """Start each call on its own thread; its outcome (result or error) lands in the list."""
    outcomes: list[Any] = [None] * len(calls)

    def run(n: int) -> None:
        try:
            outcomes[n] = calls[n]()
        except Exception as error:
            outcomes[n] = error

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    return outcomes, threads


def _grouped_behind_a_blocker(store: Store, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` while a first call holds its group: they share the next transaction."""
    shared = _shared(store)
    entered, release = threading.Event(), threading.Event()

    def blocker(uow: UnitOfWork) -> str:
        entered.set()  # inside its group: taken off the queue, holding the transaction
        release.wait(30)
        return uow.sessions.create("blocker", "cli")

    first, first_threads = _in_threads([lambda: store.transact(blocker)])
    assert entered.wait(30)
    outcomes, threads = _in_threads(calls)
    _until(lambda: shared.queued == len(calls), "the calls to queue behind the blocker")
    release.set()
    for thread in first_threads + threads:
        thread.join(30)
    assert not isinstance(first[0], Exception), first
    return outcomes


def _counts(path: Path, session_id: str) -> tuple[int, int, list[str]]:
    raw = sqlite3.connect(path)
    try:
        (counter,) = raw.execute(
            "SELECT message_count FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        contents = [
            c
            for (c,) in raw.execute(
                "SELECT content FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
            )
        ]
    finally:
        raw.close()
    return counter, len(contents), contents


def test_calls_queued_during_a_commit_share_the_next_transaction(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    for n in range(6):
        db.create_session(f"s{n}", "cli")
    shared = _shared(db.store)
    groups_before, calls_before = shared.groups, shared.calls
    outcomes = _grouped_behind_a_blocker(
        db.store, [lambda n=n: db.append_message(f"s{n}", "user", f"hello {n}") for n in range(6)]
    )
    assert all(isinstance(message_id, int) for message_id in outcomes)
    # The blocker's group, then one group holding all six appends.
    assert shared.groups - groups_before == 2
    assert shared.calls - calls_before == 7
    for n in range(6):
        assert _counts(db_path, f"s{n}") == (1, 1, [f"hello {n}"])
    db.close()


def test_a_failing_call_in_a_group_undoes_only_itself(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    store = db.store

    def append_then_fail(uow: UnitOfWork) -> None:
        uow.messages.append("a", MessageIn("user", "undone"))
        raise ValueError("the caller's own bug")

    outcomes = _grouped_behind_a_blocker(
        store,
        [
            lambda: db.append_message("a", "user", "kept 1"),
            lambda: store.transact(append_then_fail),
            lambda: db.append_message("missing", "user", "nowhere"),
            lambda: db.append_message("b", "user", "kept 2"),
            lambda: db.set_session_title("b", "x" * 1000),  # too long: refused
        ],
    )
    assert isinstance(outcomes[0], int) and isinstance(outcomes[3], int)
    assert isinstance(outcomes[1], ValueError) and "own bug" in str(outcomes[1])
    assert isinstance(outcomes[2], SessionNotFoundError)
    assert isinstance(outcomes[4], ValueError)
    assert _counts(db_path, "a") == (1, 1, ["kept 1"])
    assert _counts(db_path, "b") == (1, 1, ["kept 2"])
    assert db.get_session("b")["title"] is None  # type: ignore[index]
    assert db.message_count() == 2
    db.close()


def test_a_failing_first_call_leaves_the_rest_to_the_next_group(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    outcomes = _grouped_behind_a_blocker(
        db.store,
        [
            lambda: db.append_message("missing", "user", "x"),
            lambda: db.append_message("a", "user", "after the failure"),
        ],
    )
    assert isinstance(outcomes[0], SessionNotFoundError)
    assert isinstance(outcomes[1], int)
    assert _counts(db_path, "a") == (1, 1, ["after the failure"])
    db.close()


def test_a_database_error_inside_a_group_undoes_only_its_call(db_path: Path) -> None:
    """A constraint the database itself enforces, first in its group and later in one."""
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    store = db.store

    def duplicate(uow: UnitOfWork) -> None:
        uow.messages.append("a", MessageIn("user", "undone with its call"))
        uow.connection.exec_driver_sql(
            "INSERT INTO sessions (id, source, started_at) VALUES ('a', 'cli', 0)"
        )

    outcomes = _grouped_behind_a_blocker(
        store,
        [
            lambda: store.transact(duplicate),  # first in the group: no savepoint
            lambda: db.append_message("a", "user", "kept 1"),
            lambda: store.transact(duplicate),  # inside a savepoint
            lambda: db.append_message("a", "user", "kept 2"),
        ],
    )
    assert isinstance(outcomes[0], Exception) and isinstance(outcomes[2], Exception)
    assert "UNIQUE" in str(outcomes[0]) or "unique" in str(outcomes[0]).lower()
    assert isinstance(outcomes[1], int) and isinstance(outcomes[3], int)
    assert _counts(db_path, "a") == (2, 2, ["kept 1", "kept 2"])
    db.close()


def _poison(path: Path) -> None:
    """A trigger of the file's own that refuses one content: a real constraint error of SQLite's."""
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TRIGGER test_poison BEFORE INSERT ON messages WHEN new.content = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned message refused'); END"
    )
    raw.commit()
    raw.close()


def test_appends_of_a_group_are_written_together_with_exact_counters(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    shared = _shared(db.store)
    groups = shared.groups
    calls = [
        lambda n=n: db.append_message(
            "a" if n % 3 else "b", "assistant", f"m{n}", tool_calls=[{"id": n}] * (n % 3)
        )
        for n in range(9)
    ]
    outcomes = _grouped_behind_a_blocker(db.store, calls)
    assert shared.groups - groups == 2  # the blocker's, then the nine appends in one
    raw = sqlite3.connect(db_path)
    stored = dict(raw.execute("SELECT id, content FROM messages"))
    assert [stored[message_id] for message_id in outcomes] == [f"m{n}" for n in range(9)]
    counters = dict(
        (sid, (messages, tools))
        for sid, messages, tools in raw.execute(
            "SELECT id, message_count, tool_call_count FROM sessions WHERE id IN ('a', 'b')"
        )
    )
    raw.close()
    assert counters == {"a": (6, 9), "b": (3, 0)}
    assert db.search_messages("m4")[0]["id"] == outcomes[4]  # the FTS index has them too
    db.close()


def test_a_constraint_error_among_combined_appends_undoes_only_its_call(db_path: Path) -> None:
    """The group's one INSERT fails: the appends run again one by one, only the culprit fails."""
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    _poison(db_path)
    shared = _shared(db.store)
    groups = shared.groups
    outcomes = _grouped_behind_a_blocker(
        db.store,
        [
            lambda: db.append_message("a", "user", "kept 1"),
            lambda: db.append_message("b", "user", "kept 2"),
            lambda: db.append_message("a", "user", "poison"),
            lambda: db.append_message("b", "user", "kept 3"),
            lambda: db.append_message("a", "user", "kept 4"),
        ],
    )
    assert isinstance(outcomes[2], Exception) and "poisoned message" in str(outcomes[2])
    assert [isinstance(outcomes[n], int) for n in (0, 1, 3, 4)] == [True] * 4
    # The blocker's group, then the five's (the try that failed committed nothing, uncounted).
    assert shared.groups - groups == 2
    assert _counts(db_path, "a") == (2, 2, ["kept 1", "kept 4"])
    assert _counts(db_path, "b") == (2, 2, ["kept 2", "kept 3"])
    # Ids, counters and both FTS indexes agree with the rows.
    raw = sqlite3.connect(db_path)
    for table in ("messages_fts", "messages_fts_trigram"):
        raw.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    raw.close()
    assert [hit["content"] for hit in db.search_messages("poison")] == []
    db.close()


def test_a_failure_after_calls_ran_together_reruns_them_and_goes_on(db_path: Path) -> None:
    """A call fails in the middle: those before it run again alone, those after it as usual."""
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    _poison(db_path)
    store = db.store
    ran: list[str] = []

    def counted(name: str) -> Callable[[UnitOfWork], int]:
        def work(uow: UnitOfWork) -> int:
            ran.append(name)
            return uow.messages.append("a", MessageIn("user", name))

        return work

    outcomes = _grouped_behind_a_blocker(
        store,
        [
            lambda: store.transact(counted("one")),
            lambda: store.transact(counted("poison")),
            lambda: store.transact(counted("three")),
        ],
    )
    assert isinstance(outcomes[0], int) and isinstance(outcomes[2], int)
    assert "poisoned message" in str(outcomes[1])
    counter, real, contents = _counts(db_path, "a")
    assert counter == real == 2 and sorted(contents) == ["one", "three"]
    # Whichever was queued first: a call that ran before the poisoned one ran twice
    # (rolled back with it, then in the next transaction); the poisoned one ran once.
    assert ran.count("poison") == 1
    assert all(ran.count(name) in (1, 2) for name in ("one", "three"))
    db.close()


def _until_a_new_sleep(thread: threading.Thread) -> None:
    """Return just after ``thread`` ran and went to sleep again (Linux ``/proc``).

    A thread running SQLite code at the fork may hold one of SQLite's
    process-wide mutexes (its allocator's, its VFS's): the child inherits it
    locked and waits on it forever (seen: ``sqlite3Malloc`` in the child,
    the mutex owned by the parent's leader). That is the rule for every fork
    of a threaded process, and the docs' ("forking while another thread
    is inside a unit of work is not supported"). So the child is forked at
    the start of one of the leader's sleeps between lock attempts (100 ms by
    then), when it holds none of them.
    """
    task = Path(f"/proc/self/task/{thread.native_id}")
    if not (task / "wchan").exists() or not (task / "schedstat").exists():
        pytest.skip("needs /proc/self/task/<tid>/wchan and schedstat (Linux)")

    def ran() -> int:
        return int((task / "schedstat").read_text().split()[0])

    time.sleep(0.4)  # past SQLite's short first sleeps: from here on, 100 ms each
    before = ran()
    deadline = time.monotonic() + 30
    while ran() == before or "sleep" not in (task / "wchan").read_text():
        assert time.monotonic() < deadline, "the leader never went to sleep again"
        time.sleep(0.0002)


def test_a_child_forked_while_a_call_leads_writes_on_its_own(db_path: Path) -> None:
    """The parent's leader and queue stay in the parent: the child's writes are not stuck.

    The parent's leader is waiting for another process's lock when the child is
    forked (a parent connection *holding* the lock at the fork would keep it
    held in the child's SQLite bookkeeping: the fork rules, not ours), and
    asleep between two attempts (see :func:`_until_a_new_sleep`).
    """
    from tests.support.forked import run_forked

    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    shared = _shared(db.store)
    holder = _released_holder(db_path)
    assert holder.stdin is not None
    releasing = holder.stdin

    def in_the_child() -> int:
        # Forked while the lock is held (a fixed hold could end before the fork on a
        # loaded machine, and the leader then held SQLite's mutexes at it): the child
        # lets it go, then writes.
        releasing.write("release\n")
        releasing.flush()
        return db.append_message("a", "user", "from the child")

    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        first, threads = _in_threads([lambda: db.append_message("a", "user", "from the parent")])
        _until(lambda: shared.leading, "the parent's call to lead")
        _until_a_new_sleep(threads[0])
        kind, value = run_forked(in_the_child)
        for thread in threads:
            thread.join(30)
    finally:
        releasing.close()
        holder.wait(30)
    assert kind == "ok" and isinstance(value, int), (kind, value)
    assert isinstance(first[0], int)
    counter, real, contents = _counts(db_path, "a")
    assert counter == real == 2 and sorted(contents) == ["from the child", "from the parent"]
    db.close()


def test_a_writer_alone_commits_each_call_at_once(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("s", "cli")
    shared = _shared(db.store)
    groups, calls = shared.groups, shared.calls
    for n in range(5):
        db.append_message("s", "user", f"m{n}")
        # Visible to another connection as soon as the call returned: committed.
        assert _counts(db_path, "s")[1] == n + 1
    assert (shared.groups - groups, shared.calls - calls) == (5, 5)
    db.close()


def test_threads_keep_each_sessions_order_and_exact_counters(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    writers, appends = 6, 25
    for n in range(writers):
        db.create_session(f"t{n}", "cli")
    db.create_session("common", "cli")

    def write(n: int) -> None:
        for k in range(appends):
            db.append_message(f"t{n}", "user", f"{k}")
            db.append_messages("common", [{"role": "user", "content": f"{n}:{k}"}])

    outcomes, threads = _in_threads([lambda n=n: write(n) for n in range(writers)])
    for thread in threads:
        thread.join(120)
    assert outcomes == [None] * writers
    for n in range(writers):
        assert _counts(db_path, f"t{n}") == (appends, appends, [str(k) for k in range(appends)])
    counter, real, contents = _counts(db_path, "common")
    assert counter == real == writers * appends
    for n in range(writers):  # each thread's own calls stay in its order
        mine = [c for c in contents if c.startswith(f"{n}:")]
        assert mine == [f"{n}:{k}" for k in range(appends)]
    db.close()


def test_a_queued_call_out_of_patience_writes_nothing(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("s", "cli")
    store = db.store
    holder = _released_holder(db_path)
    assert holder.stdin is not None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        shared = _shared(store)
        # The first call leads and waits for the other process's lock (patience 30 s) ...
        first, first_threads = _in_threads([lambda: db.append_message("s", "user", "patient")])
        _until(lambda: shared.leading, "the first call to lead")
        # ... the second queues behind it with a patience that runs out first.
        second, second_threads = _in_threads(
            [
                lambda: store.transact(
                    lambda uow: uow.messages.append("s", MessageIn("user", "impatient")),
                    patience_s=0.2,
                )
            ]
        )
        for thread in second_threads:
            thread.join(30)
        assert isinstance(second[0], StoreLockedError)
        holder.stdin.close()  # only now: the first call waited the whole time
        for thread in first_threads:
            thread.join(30)
        assert isinstance(first[0], int)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert _counts(db_path, "s") == (1, 1, ["patient"])
    db.close()


@pytest.mark.parametrize("mode", ["threads", "tasks"])
def test_sigkill_mid_group_loses_nothing_acknowledged(db_path: Path, mode: str) -> None:
    rng = random.Random(20261203)
    acknowledged: list[list[int]] = []
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(db_path), f"r{round_}", mode, "4", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        first = proc.stdout.readline()  # killed only after a first acknowledged turn
        time.sleep(rng.uniform(0.2, 0.5))
        proc.send_signal(signal.SIGKILL)
        out, _err = proc.communicate(timeout=60)
        for line in [first, *out.splitlines()]:
            parts = line.split()
            if len(parts) == 4:  # a line the kill cut short was not an acknowledgement
                acknowledged.append([int(p) for p in parts[1:]])
    assert len(acknowledged) >= 3, "the writers must have committed turns"
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    present = {row[0] for row in raw.execute("SELECT id FROM messages")}
    assert [ids for ids in acknowledged if not set(ids) <= present] == []
    for session_id, counter in raw.execute("SELECT id, message_count FROM sessions"):
        (real,) = raw.execute(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        assert counter == real and real % 3 == 0, session_id  # whole turns only
    raw.close()


def test_a_groups_appends_move_each_sessions_counters_by_its_own_amounts(db_path: Path) -> None:
    """The combined run: each session's counters by its own amounts, or none when one is unknown."""
    from hermes_store.uow.appends import append_work

    db = SessionDB(db_path)
    for session_id in ("a", "b", "c"):
        db.create_session(session_id, "cli")
    calls = [{"id": "t1"}, {"id": "t2"}]
    works = [
        append_work("a", MessageIn("user", "one")),
        append_work("b", MessageIn("assistant", "two", tool_calls=calls)),
        append_work("a", MessageIn("assistant", "three", tool_calls=calls[:1])),
        append_work("c", MessageIn("user", "four")),
    ]
    ids = db.store.transact(lambda uow: works[0].run_all(uow, [w.payload for w in works]))
    assert ids == sorted(ids) and len(ids) == 4
    counters = {
        s: (db.get_session(s)["message_count"], db.get_session(s)["tool_call_count"])  # type: ignore[index]
        for s in ("a", "b", "c")
    }
    assert counters == {"a": (2, 1), "b": (1, 2), "c": (1, 0)}

    doomed = [
        append_work("a", MessageIn("user", "x")),
        append_work("nowhere", MessageIn("user", "y")),
    ]
    with pytest.raises(SessionNotFoundError, match="nowhere"):
        db.store.transact(lambda uow: doomed[0].run_all(uow, [w.payload for w in doomed]))
    assert db.get_session("a")["message_count"] == 2  # type: ignore[index]  # rolled back
    assert db.message_count() == 4
    db.close()


def _deferred_reference(path: Path) -> None:
    """A table of the file's own whose reference is checked only at COMMIT (deferred)."""
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TABLE test_notes (session_id TEXT REFERENCES sessions(id) "
        "DEFERRABLE INITIALLY DEFERRED)"
    )
    raw.commit()
    raw.close()


def test_a_group_whose_commit_fails_tells_every_call_and_writes_none(db_path: Path) -> None:
    """The group's one COMMIT fails (a deferred foreign key): no call of it hears "written".

    Whether the innocent calls share the failing group depends on the
    machine's speed (a group stops taking calls after 50 ms); what holds
    either way: a call hears "written" exactly when it was, and the call
    whose commit failed hears the failure.
    """
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    _deferred_reference(db_path)
    store = db.store

    def append(content: str) -> Callable[[UnitOfWork], int]:
        return lambda uow: uow.messages.append("a", MessageIn("user", content))

    def dangling(uow: UnitOfWork) -> int:
        uow.connection.exec_driver_sql("INSERT INTO test_notes VALUES ('no such session')")
        return uow.messages.append("a", MessageIn("user", "dangling"))

    outcomes = _grouped_behind_a_blocker(
        store,
        [
            lambda: store.transact(append("before")),
            lambda: store.transact(dangling),
            lambda: store.transact(append("after")),
        ],
    )
    assert isinstance(outcomes[1], Exception), outcomes
    assert "foreign key" in str(outcomes[1]).lower()
    _, _, written = _counts(db_path, "a")
    told = [
        name
        for name, outcome in zip(["before", "dangling", "after"], outcomes, strict=True)
        if not isinstance(outcome, Exception)
    ]
    assert sorted(told) == sorted(written), (outcomes, written)
    db.append_message("a", "user", "the next group commits")
    assert _counts(db_path, "a")[2] == [*written, "the next group commits"]
    db.close()


def test_a_call_failing_in_a_group_hears_the_stores_error(db_path: Path) -> None:
    """SQLite's SQLITE_FULL inside a group's call is a StoreFullError, as outside one."""
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    store = db.store

    def overflowing(uow: UnitOfWork) -> int:
        connection = uow.connection
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
        connection.exec_driver_sql(f"PRAGMA max_page_count = {pages}")  # a full disk, here
        try:
            return uow.messages.append("a", MessageIn("user", "x" * 200_000))
        finally:
            connection.exec_driver_sql("PRAGMA max_page_count = 1073741823")

    outcomes = _grouped_behind_a_blocker(
        store,
        [
            lambda: store.transact(overflowing),
            lambda: db.append_message("a", "user", "kept"),
        ],
    )
    assert isinstance(outcomes[0], StoreFullError), repr(outcomes[0])
    assert isinstance(outcomes[1], int), outcomes
    assert _counts(db_path, "a") == (1, 1, ["kept"])
    db.close()


def _bounded(store: Store, max_calls: int) -> SharedCommits:
    """The store's shared commits made again with a smaller group bound (the same parts)."""
    shared = _shared(store)
    store.shared = SharedCommits(
        lambda patience: store.write(patience_s=patience),
        shared.default_patience_s,
        shared.database,
        lambda error: None,
        max_calls=max_calls,
        max_hold_s=30.0,  # the count, not the clock, ends these groups
    )
    return store.shared


def test_a_group_takes_at_most_max_calls_calls_one_by_one(db_path: Path) -> None:
    store = Store(db_path, shared_commits=True)
    store.transact(lambda uow: uow.sessions.create("a", "cli"))
    shared = _bounded(store, 3)
    groups: list[int] = []  # for each call, the group it ran in (groups counts them)

    def noted(uow: UnitOfWork) -> None:
        groups.append(shared.groups)

    outcomes = _grouped_behind_a_blocker(store, [lambda: store.transact(noted)] * 7)
    assert outcomes == [None] * 7
    sizes = sorted(groups.count(group) for group in set(groups))
    assert sizes == [1, 3, 3], groups  # the blocker ran alone; then 3, 3 and the last one
    store.close()


def test_combined_appends_fill_a_group_to_max_calls_and_no_further(db_path: Path) -> None:
    db = SessionDB(db_path, shared_commits=True)
    for n in range(5):
        db.create_session(f"s{n}", "cli")
    shared = _bounded(db.store, 4)
    calls = [lambda n=n: db.append_message(f"s{n}", "user", f"m{n}") for n in range(5)]
    before = shared.groups
    outcomes = _grouped_behind_a_blocker(db.store, calls)
    assert all(isinstance(outcome, int) for outcome in outcomes), outcomes
    # The blocker's unit, then four appends combined, then the fifth alone.
    assert shared.groups - before == 3
    for n in range(5):
        assert _counts(db_path, f"s{n}") == (1, 1, [f"m{n}"])
    db.close()


def _queued_in_order_behind_a_blocker(store: Store, calls: list[Callable[[], Any]]) -> list[Any]:
    """Like :func:`_grouped_behind_a_blocker`, each call queued only once the previous one is."""
    shared = _shared(store)
    entered, release = threading.Event(), threading.Event()

    def blocker(uow: UnitOfWork) -> str:
        entered.set()
        release.wait(30)
        return uow.sessions.create("blocker", "cli")

    first, threads = _in_threads([lambda: store.transact(blocker)])
    assert entered.wait(30)
    outcomes: list[Any] = []
    for n, call in enumerate(calls):
        outcome, started = _in_threads([call])
        outcomes.append(outcome)
        threads += started
        _until(lambda n=n: shared.queued == n + 1, f"call {n} to queue")
    release.set()
    for thread in threads:
        thread.join(30)
    assert not isinstance(first[0], Exception), first
    return [outcome[0] for outcome in outcomes]


def test_a_combined_append_failing_alone_hears_the_stores_error(db_path: Path) -> None:
    """Combined appends fail; run again alone, each in a savepoint, each hears StoreFullError.

    The leader's connection may not grow the file for the group (``PRAGMA
    max_page_count``: a statement's SQLITE_FULL, a full disk as SQLite sees it)
    -- set by a call queued first, lifted by one queued last.
    """
    db = SessionDB(db_path, shared_commits=True)
    db.create_session("a", "cli")
    store = db.store

    def no_growth(uow: UnitOfWork) -> None:
        pages = uow.connection.exec_driver_sql("PRAGMA page_count").scalar()
        uow.connection.exec_driver_sql(f"PRAGMA max_page_count = {pages}")

    def growth(uow: UnitOfWork) -> None:
        uow.connection.exec_driver_sql("PRAGMA max_page_count = 1073741823")

    outcomes = _queued_in_order_behind_a_blocker(
        store,
        [
            lambda: store.transact(no_growth),
            lambda: db.append_message("a", "user", "x" * 200_000),
            lambda: db.append_message("a", "user", "y" * 200_000),
            lambda: store.transact(growth),
        ],
    )
    assert isinstance(outcomes[1], StoreFullError), outcomes
    assert isinstance(outcomes[2], StoreFullError), outcomes
    db.append_message("a", "user", "room again")
    assert _counts(db_path, "a") == (1, 1, ["room again"])
    db.close()
