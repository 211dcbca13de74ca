"""The asyncio API: the same results and errors as SessionDB, and a loop that never waits.

No timing thresholds: "the loop was not blocked" is asserted as a count --
a ticker task on the loop advanced many times while a write waited 1.5 s for
another process's lock -- not as a measured stall.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store
from hermes_store.aio import AsyncSessionDB, AsyncStore
from hermes_store.aio.offload import Offloader
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn
from hermes_store.errors import (
    InvalidInputError,
    SessionNotFoundError,
    StoreLockedError,
    TitleConflictError,
)
from hermes_store.uow.unit import UnitOfWork
from tests.conftest import ManualClock
from tests.support.paths import SUPPORT
from tests.support.processes import probe_output

HOLDER = SUPPORT / "lock_holder.py"


async def _lock_held(db_path: Path) -> asyncio.subprocess.Process:
    """Another process holding the file's write lock until :func:`_release` (then ``wait()``)."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HOLDER),
        str(db_path),
        "release",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert (await holder.stdout.readline()).strip() == b"locked"
    return holder


def _release(holder: asyncio.subprocess.Process) -> None:
    """The holder rolls back: its standard input ends."""
    assert holder.stdin is not None
    holder.stdin.close()


def _public(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") and callable(member) and name != "close"
    }


def test_every_sessiondb_method_is_a_coroutine_with_the_same_signature() -> None:
    sync, aio = _public(SessionDB), _public(AsyncSessionDB)
    assert set(sync) <= set(aio), f"missing: {sorted(set(sync) - set(aio))}"
    for name, method in sync.items():
        if isinstance(method, staticmethod):  # pure helpers need no thread
            assert isinstance(inspect.getattr_static(AsyncSessionDB, name), staticmethod)
            continue
        counterpart = getattr(AsyncSessionDB, name)
        assert inspect.iscoroutinefunction(counterpart), name
        assert inspect.signature(counterpart).parameters.keys() == (
            inspect.signature(method).parameters.keys()
        ), name
        for parameter in inspect.signature(method).parameters.values():
            other = inspect.signature(counterpart).parameters[parameter.name]
            assert (other.default, other.kind) == (parameter.default, parameter.kind), name
    assert inspect.iscoroutinefunction(AsyncSessionDB.close)


def _scenario_sync(db: SessionDB) -> list[Any]:
    out: list[Any] = []

    def attempt(fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            out.append(fn(*args, **kwargs))
        except Exception as error:
            out.append(type(error))

    attempt(db.create_session, "root", "cli", model="m1", model_config={"t": 1})
    attempt(db.create_session, "child", "telegram", parent_session_id="root")
    attempt(db.create_session, "orphan", "cli", parent_session_id="nobody")
    attempt(db.append_message, "root", "user", "hello async world")
    attempt(db.append_message, "root", "assistant", "hi", tool_calls=[{"id": "c1"}])
    attempt(db.append_messages, "child", [{"role": "user", "content": "child says hello"}])
    attempt(db.append_message, "missing", "user", "x")
    attempt(db.set_session_title, "root", "Fix Docker Build")
    attempt(db.set_session_title, "child", "Fix Docker Build")
    attempt(db.set_session_title, "root", "x" * 1000)
    attempt(db.update_token_counts, "root", 10, 5, model="m1", estimated_cost_usd=0.25)
    attempt(db.update_system_prompt, "root", "be brief")
    attempt(db.ensure_session, "ensured", "cron")
    attempt(db.end_session, "child", "compression")
    attempt(db.reopen_session, "child")
    attempt(db.end_session, "ensured", "done")
    attempt(db.get_session, "root")
    attempt(db.resolve_session_id, "roo")
    attempt(db.get_session_title, "root")
    attempt(db.get_session_by_title, "Fix Docker Build")
    attempt(db.resolve_session_by_title, "Fix Docker Build")
    attempt(db.get_next_title_in_lineage, "Fix Docker Build")
    attempt(db.get_messages, "root")
    attempt(db.get_messages_as_conversation, "root")
    attempt(db.message_count)
    attempt(db.search_messages, "hello")
    attempt(db.search_messages, '"unbalanced')
    attempt(db.search_sessions)
    attempt(db.list_sessions_rich, include_children=True)
    attempt(db.get_compression_tip, "root")
    attempt(db.session_count, "cli")
    attempt(db.get_ancestors, "child")
    attempt(db.get_descendants, "root")
    attempt(db.token_usage_by_model)
    attempt(db.top_sessions_by_tokens, 5)
    attempt(db.export_session, "root")
    attempt(db.export_all)
    attempt(lambda: list(db.iter_export("cli")))
    attempt(db.iter_export, 5)
    attempt(db.clear_messages, "child")
    attempt(db.prune_sessions, 0)
    attempt(db.delete_session, "root")
    attempt(db.delete_session, "root")
    attempt(db.sanitize_title, "  a\tb  ")
    return out


async def _scenario_async(db: AsyncSessionDB) -> list[Any]:
    out: list[Any] = []

    async def attempt(fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            out.append(await fn(*args, **kwargs))
        except Exception as error:
            out.append(type(error))

    async def iterated(source: str) -> list[Any]:
        return [row async for row in await db.iter_export(source)]

    await attempt(db.create_session, "root", "cli", model="m1", model_config={"t": 1})
    await attempt(db.create_session, "child", "telegram", parent_session_id="root")
    await attempt(db.create_session, "orphan", "cli", parent_session_id="nobody")
    await attempt(db.append_message, "root", "user", "hello async world")
    await attempt(db.append_message, "root", "assistant", "hi", tool_calls=[{"id": "c1"}])
    await attempt(db.append_messages, "child", [{"role": "user", "content": "child says hello"}])
    await attempt(db.append_message, "missing", "user", "x")
    await attempt(db.set_session_title, "root", "Fix Docker Build")
    await attempt(db.set_session_title, "child", "Fix Docker Build")
    await attempt(db.set_session_title, "root", "x" * 1000)
    await attempt(db.update_token_counts, "root", 10, 5, model="m1", estimated_cost_usd=0.25)
    await attempt(db.update_system_prompt, "root", "be brief")
    await attempt(db.ensure_session, "ensured", "cron")
    await attempt(db.end_session, "child", "compression")
    await attempt(db.reopen_session, "child")
    await attempt(db.end_session, "ensured", "done")
    await attempt(db.get_session, "root")
    await attempt(db.resolve_session_id, "roo")
    await attempt(db.get_session_title, "root")
    await attempt(db.get_session_by_title, "Fix Docker Build")
    await attempt(db.resolve_session_by_title, "Fix Docker Build")
    await attempt(db.get_next_title_in_lineage, "Fix Docker Build")
    await attempt(db.get_messages, "root")
    await attempt(db.get_messages_as_conversation, "root")
    await attempt(db.message_count)
    await attempt(db.search_messages, "hello")
    await attempt(db.search_messages, '"unbalanced')
    await attempt(db.search_sessions)
    await attempt(db.list_sessions_rich, include_children=True)
    await attempt(db.get_compression_tip, "root")
    await attempt(db.session_count, "cli")
    await attempt(db.get_ancestors, "child")
    await attempt(db.get_descendants, "root")
    await attempt(db.token_usage_by_model)
    await attempt(db.top_sessions_by_tokens, 5)
    await attempt(db.export_session, "root")
    await attempt(db.export_all)
    await attempt(iterated, "cli")
    await attempt(db.iter_export, 5)
    await attempt(db.clear_messages, "child")
    await attempt(db.prune_sessions, 0)
    await attempt(db.delete_session, "root")
    await attempt(db.delete_session, "root")
    out.append(db.sanitize_title("  a\tb  "))
    return out


def test_the_async_api_gives_the_same_results_and_errors(
    tmp_path: Path, store_url: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """The same calls on a SessionDB and an AsyncSessionDB, each on its own database."""
    if backend == "postgresql":
        other: Any = request.getfixturevalue("pg_fresh_url")()
    else:
        other = tmp_path / "sync.db"
    sync_db = SessionDB(other, clock=ManualClock())
    expected = _scenario_sync(sync_db)
    sync_db.close()

    async def main() -> list[Any]:
        async with AsyncSessionDB(store=Store(store_url, clock=ManualClock())) as db:
            return await _scenario_async(db)

    got = asyncio.run(main())
    assert len(got) == len(expected)
    for n, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert mine == theirs, f"call {n}: {mine!r} != {theirs!r}"
    # The errors themselves were raised, not swallowed: the scenario holds several.
    raised = {outcome for outcome in expected if isinstance(outcome, type)}
    assert {SessionNotFoundError, TitleConflictError, InvalidInputError} <= raised


def _messages(path: Path, session_id: str) -> tuple[int, list[str]]:
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
    return counter, contents


@pytest.mark.sqlite_only("another process holding SQLite's write lock")
def test_the_loop_runs_on_while_a_write_waits_for_another_process(db_path: Path) -> None:
    async def main() -> tuple[int, int, int]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        holder = await _lock_held(db_path)
        ticks = 0
        write_done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not write_done.is_set():
                await asyncio.sleep(0.005)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        write = asyncio.create_task(db.append_message("s", "user", "after the lock"))
        await asyncio.sleep(0.5)
        ticks_while_locked = ticks
        still_waiting = not write.done()  # the holder keeps the lock until released
        _release(holder)
        message_id = await write
        write_done.set()
        await ticking
        await holder.wait()
        await db.close()
        assert still_waiting and isinstance(message_id, int)
        return ticks_while_locked, ticks, message_id

    during, total, _id = asyncio.run(main())
    # 0.5 s of 5 ms sleeps: ~100 ticks if the loop ran on; 0 or 1 had it been stalled.
    assert during >= 20 and total > during
    assert _messages(db_path, "s") == (1, ["after the lock"])


@pytest.mark.sqlite_only("SQLite file checked with plain sqlite3")
def test_one_sessions_messages_keep_the_order_of_the_calls(db_path: Path) -> None:
    async def main() -> None:
        async with await AsyncSessionDB.open(db_path) as db:
            await db.create_session("s", "cli")
            await db.create_session("t", "cli")
            calls = []
            for k in range(40):
                calls.append(db.append_message("s", "user", f"s{k}"))
                if k % 2:
                    calls.append(db.append_messages("t", [{"role": "user", "content": f"t{k}"}]))
            await asyncio.gather(*calls)

    asyncio.run(main())
    assert _messages(db_path, "s") == (40, [f"s{k}" for k in range(40)])
    assert _messages(db_path, "t") == (20, [f"t{k}" for k in range(1, 40, 2)])


@pytest.mark.sqlite_only("another process holding SQLite's write lock")
def test_a_cancelled_write_is_all_or_nothing(db_path: Path) -> None:
    """Cancelled while waiting for the lock, and cancelled before its turn: whole or absent."""

    async def main() -> tuple[bool, bool]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        holder = await _lock_held(db_path)
        turn = [{"role": "user", "content": f"part {n}"} for n in range(3)]
        waiting = asyncio.create_task(db.append_messages("s", turn))
        queued = asyncio.create_task(db.append_messages("s", turn))  # behind it (same session)
        await asyncio.sleep(0.2)
        waiting.cancel()
        queued.cancel()
        results = await asyncio.gather(waiting, queued, return_exceptions=True)
        _release(holder)
        await holder.wait()
        await db.close()  # waits for the worker still running the first unit
        return tuple(isinstance(r, asyncio.CancelledError) for r in results)  # type: ignore[return-value]

    assert asyncio.run(main()) == (True, True)
    counter, contents = _messages(db_path, "s")
    assert counter == len(contents)
    assert len(contents) % 3 == 0  # whole turns only
    # The first was handed to a worker before the cancel: it committed, whole.
    # The second was cancelled before its turn came: nothing of it ran.
    assert contents == ["part 0", "part 1", "part 2"]


def test_async_store_units(store_url: str) -> None:
    async def main() -> None:
        astore = await AsyncStore.open(store_url)
        async with astore:
            await astore.transact(lambda uow: uow.sessions.create("s", "cli"))
            ids = await asyncio.gather(
                *(
                    astore.transact(
                        lambda uow, k=k: uow.messages.append("s", MessageIn("user", f"m{k}"))
                    )
                    for k in range(10)
                )
            )
            assert len(set(ids)) == 10

            def fails(uow: UnitOfWork) -> None:
                uow.messages.append("s", MessageIn("user", "undone"))
                raise ValueError("boom")

            with pytest.raises(ValueError, match="boom"):
                await astore.transact(fails)
            with pytest.raises(SessionNotFoundError):
                await astore.transact(
                    lambda uow: uow.messages.append("nope", MessageIn("user", "x"))
                )
            with pytest.raises(InvalidInputError):
                await astore.transact(lambda uow: None, patience_s=-1)
            count = await astore.read(lambda uow: uow.messages.count("s"))
            contents = await astore.read(
                lambda uow: [m.content for m in uow.messages.for_session("s")]
            )
            assert count == 10
            if astore.store.shared is not None:  # queued on the loop: the order of the calls
                assert contents == [f"m{k}" for k in range(10)]
            else:
                assert sorted(contents) == sorted(f"m{k}" for k in range(10))
            threads = await astore.run(lambda: threading.current_thread().name)
            assert threads.startswith("hermes-store-aio")

    asyncio.run(main())


@pytest.mark.sqlite_only("another process holding SQLite's write lock")
def test_a_write_cancelled_while_queued_is_withdrawn(db_path: Path) -> None:
    """Queued on the loop behind a group waiting for the lock: cancelled, it never runs."""

    async def main() -> tuple[Any, Any]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        await db.create_session("t", "cli")
        holder = await _lock_held(db_path)
        first = asyncio.create_task(db.append_message("s", "user", "kept"))
        await asyncio.sleep(0.1)  # its group's leader now waits for the lock
        second = asyncio.create_task(db.append_message("t", "user", "withdrawn"))
        await asyncio.sleep(0.1)
        second.cancel()
        _release(holder)
        results = await asyncio.gather(first, second, return_exceptions=True)
        await holder.wait()
        await db.close()
        return results[0], results[1]

    kept, withdrawn = asyncio.run(main())
    assert isinstance(kept, int) and isinstance(withdrawn, asyncio.CancelledError)
    assert _messages(db_path, "s") == (1, ["kept"])
    assert _messages(db_path, "t") == (0, [])


@pytest.mark.sqlite_only("another process holding SQLite's write lock")
def test_a_queued_write_out_of_patience_writes_nothing(db_path: Path) -> None:
    async def main() -> tuple[Any, Any]:
        astore = await AsyncStore.open(db_path)
        await astore.transact(lambda uow: uow.sessions.create("s", "cli"))
        holder = await _lock_held(db_path)
        patient = asyncio.create_task(
            astore.transact(lambda uow: uow.messages.append("s", MessageIn("user", "patient")))
        )
        await asyncio.sleep(0.1)
        impatient = astore.transact(
            lambda uow: uow.messages.append("s", MessageIn("user", "impatient")), patience_s=0.2
        )
        (impatient_outcome,) = await asyncio.gather(impatient, return_exceptions=True)
        _release(holder)  # only now: the patient one waited the whole time
        (patient_outcome,) = await asyncio.gather(patient, return_exceptions=True)
        await holder.wait()
        await astore.close()
        return patient_outcome, impatient_outcome

    patient, impatient = asyncio.run(main())
    assert isinstance(patient, int)
    assert isinstance(impatient, StoreLockedError)
    assert _messages(db_path, "s") == (1, ["patient"])


@pytest.mark.sqlite_only("SQLite file checked with plain sqlite3")
def test_concurrent_tasks_appends_fail_alone(db_path: Path) -> None:
    """Eight tasks' appends share groups; the one naming no session fails, the rest are kept."""

    async def main() -> list[Any]:
        async with await AsyncSessionDB.open(db_path) as db:
            for n in range(8):
                await db.create_session(f"w{n}", "cli")

            async def writer(n: int) -> list[Any]:
                out: list[Any] = []
                for k in range(10):
                    target = "missing" if (n, k) == (3, 5) else f"w{n}"
                    try:
                        out.append(await db.append_message(target, "user", f"{n}:{k}"))
                    except SessionNotFoundError as error:
                        out.append(error)
                return out

            return await asyncio.gather(*(writer(n) for n in range(8)))

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[3][5], SessionNotFoundError)
    for n in range(8):
        expected = [f"{n}:{k}" for k in range(10) if (n, k) != (3, 5)]
        assert _messages(db_path, f"w{n}") == (len(expected), expected)


@pytest.mark.sqlite_only("shared commits are SQLite's")
def test_a_shared_write_cancelled_while_it_runs_commits_whole_and_close_waits(
    db_path: Path,
) -> None:
    """Cancelled once a group has taken it: the task stops waiting, the unit still commits."""
    started, go = threading.Event(), threading.Event()

    def slow(uow: UnitOfWork) -> int:
        started.set()
        go.wait(10)
        uow.messages.append("s", MessageIn("user", "ran on"))
        return uow.messages.append("s", MessageIn("user", "whole"))

    async def main() -> bool:
        astore = await AsyncStore.open(db_path)
        await astore.transact(lambda uow: uow.sessions.create("s", "cli"))
        task = asyncio.create_task(astore.transact(slow))
        assert await asyncio.to_thread(started.wait, 10)  # inside its group, on the leader
        task.cancel()
        cancelled = False
        try:
            await task
        except asyncio.CancelledError:
            cancelled = True
        threading.Timer(0.2, go.set).start()
        await astore.close()  # waits for the unit its cancelled task left running
        return cancelled

    assert asyncio.run(main())
    assert _messages(db_path, "s") == (2, ["ran on", "whole"])


@pytest.mark.sqlite_only("another process holding SQLite's write lock")
def test_a_withdrawn_append_lets_the_sessions_next_one_go(db_path: Path) -> None:
    """The next append of the same session waits for its turn; a withdrawn one gives it."""

    async def main() -> tuple[Any, Any]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        holder = await _lock_held(db_path)
        first = asyncio.create_task(db.append_message("s", "user", "withdrawn"))
        await asyncio.sleep(0.1)  # queued; its group's leader waits for the lock
        second = asyncio.create_task(db.append_message("s", "user", "kept"))
        await asyncio.sleep(0.1)  # waits for the first to end
        first.cancel()
        _release(holder)
        results = await asyncio.gather(first, second, return_exceptions=True)
        await holder.wait()
        await db.close()
        return results[0], results[1]

    withdrawn, kept = asyncio.run(main())
    assert isinstance(withdrawn, asyncio.CancelledError) and isinstance(kept, int)
    assert _messages(db_path, "s") == (1, ["kept"])


def test_importing_the_async_api_loads_what_a_unit_would_import_in_a_worker() -> None:
    """An import in a worker thread holds the GIL for milliseconds: it must not wait for a loop."""
    lazy = [
        "hermes_store.repositories.messages",
        "hermes_store.repositories.search",
        "hermes_store.repositories.sessions",
    ]
    probe = (
        "import sys\n"
        f"lazy = {lazy!r}\n"
        "import hermes_store\n"
        "before = [m for m in lazy if m in sys.modules]\n"
        "import hermes_store.aio\n"
        "print(before, [m for m in lazy if m not in sys.modules])\n"
    )
    # A plain `import hermes_store` keeps them lazy; the async API loads them all.
    assert probe_output(probe) == "[] []"


def test_a_call_made_after_the_first_ended_still_waits_for_the_second() -> None:
    """The first call's end releases only its own turn, never the turn of a call behind it."""
    order: list[str] = []
    gates = {name: threading.Event() for name in ("first", "second")}

    def step(name: str) -> None:
        if name in gates:
            assert gates[name].wait(30)
        order.append(name)

    async def main() -> None:
        offload = Offloader(4)
        first = asyncio.create_task(offload.ordered("s", step, "first"))
        second = asyncio.create_task(offload.ordered("s", step, "second"))
        await asyncio.sleep(0)  # both made: the second waits for the first
        gates["first"].set()
        await first  # the second's turn: it runs, held by its gate
        third = asyncio.create_task(offload.ordered("s", step, "third"))
        await asyncio.wait([third], timeout=0.5)  # it must not run while the second does
        gates["second"].set()
        await asyncio.gather(second, third)
        await offload.close()

    asyncio.run(main())
    assert order == ["first", "second", "third"]
