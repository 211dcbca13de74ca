"""Closing an asyncio store with writes still queued: every call answered, the file let go.

Real files, real worker threads. Before ``close()`` answered queued calls,
five writes of one session started together and then ``close()`` gave one
result and four foreign ``RuntimeError``s (the pool refused them); with
cancellations mixed in, appends were never answered at all, and a refused
append stayed queued, to be written by the next group after its caller was
told it failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store, StoreClosedError, StoreError
from hermes_store.aio import AsyncSessionDB, AsyncStore
from hermes_store.aio.shared import LoopWrites
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn

pytestmark = pytest.mark.sqlite_only("the file is checked with plain sqlite3")


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    raw = sqlite3.connect(path)
    try:
        return list(raw.execute(sql))
    finally:
        raw.close()


def _contents(path: Path) -> list[str]:
    return [c for (c,) in _rows(path, "SELECT content FROM messages ORDER BY id")]


def _write(db: AsyncSessionDB, method: str, k: int) -> Awaitable[Any]:
    if method == "update_token_counts":
        return db.update_token_counts("s", input_tokens=1)
    if method == "append_messages":
        return db.append_messages("s", [{"role": "user", "content": f"m{k}"}])
    if method == "append_message":
        return db.append_message("s", "user", f"m{k}")
    return db.set_session_title("s", f"t{k}")


def _file_is_free(path: Path) -> None:
    """A new store on the file writes at once (patience 0: a held lock would fail it)."""
    store = Store(path)
    try:
        with store.write(patience_s=0) as uow:
            uow.sessions.create("after", "cli")
    finally:
        store.close()


@pytest.mark.parametrize(
    "method", ["update_token_counts", "append_messages", "set_session_title", "append_message"]
)
def test_close_answers_five_queued_writes_of_one_session(db_path: Path, method: str) -> None:
    async def main() -> list[Any]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        tasks = [asyncio.create_task(_write(db, method, k)) for k in range(5)]
        await asyncio.sleep(0)  # each has made its call: the first runs, four wait their turn
        await db.close()
        assert all(task.done() for task in tasks), "close() returned with callers unanswered"
        return [task.result() for task in tasks]  # a RuntimeError here is the old bug

    results = asyncio.run(main())
    assert len(results) == 5
    if method == "update_token_counts":
        assert _rows(db_path, "SELECT input_tokens FROM sessions WHERE id = 's'") == [(5,)]
    elif method == "set_session_title":
        assert results == [True] * 5
        assert _rows(db_path, "SELECT title FROM sessions WHERE id = 's'") == [("t4",)]
    else:
        assert _contents(db_path) == [f"m{k}" for k in range(5)]
    _file_is_free(db_path)


@pytest.mark.parametrize("method", ["append_message", "append_messages"])
def test_close_with_cancellations_answers_everyone_and_nothing_failed_commits_later(
    db_path: Path, method: str
) -> None:
    """Twenty writes, some cancelled before their turn, some while running, then ``close()``."""

    async def main() -> tuple[list[asyncio.Task[Any]], set[int]]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        tasks = [asyncio.create_task(_write(db, method, k)) for k in range(20)]
        await asyncio.sleep(0)
        for task in tasks[1::3]:  # cancelled at once: waiting for their turn
            task.cancel()
        await asyncio.sleep(0.01)
        for task in tasks[2::5]:  # cancelled later: some may be running by now
            task.cancel()
        closing = asyncio.create_task(db.close())
        await asyncio.sleep(0)
        late = asyncio.create_task(_write(db, method, 99))  # made once close() has begun
        await closing
        await asyncio.sleep(0)  # the callbacks close() fired
        assert all(task.done() for task in [*tasks, late]), "callers left unanswered"
        with pytest.raises(StoreClosedError):
            await late
        cancelled = {k for k, task in enumerate(tasks) if task.cancelled()}
        # The program keeps the wrapped SessionDB and writes on: nothing queued comes back.
        db.db.append_message("s", "user", "after close")
        db.db.close()
        return tasks, cancelled

    tasks, cancelled = asyncio.run(main())
    ok = set()
    for k, task in enumerate(tasks):
        if k in cancelled:
            continue
        error = task.exception()
        assert error is None or isinstance(error, StoreError), repr(error)
        if error is None:
            ok.add(f"m{k}")
    contents = _contents(db_path)
    assert contents[-1] == "after close"
    written = set(contents[:-1])
    assert ok <= written, "a write reported done is missing"
    assert written <= ok | {f"m{k}" for k in cancelled}, "a write reported failed was committed"
    assert ok, "no write went through: the scenario did not run"
    _file_is_free(db_path)


def test_every_use_after_close_is_the_stores_error(db_path: Path) -> None:
    async def main() -> list[BaseException]:
        db = await AsyncSessionDB.open(db_path)
        await db.create_session("s", "cli")
        await db.close()
        astore = await AsyncStore.open(db_path)
        await astore.close()
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: db.get_session("s"),
            lambda: db.append_message("s", "user", "late"),
            lambda: db.update_token_counts("s", input_tokens=1),
            lambda: db.prune_sessions(1),
            lambda: db.iter_export(),
            lambda: astore.transact(lambda uow: uow.sessions.create("t", "cli")),
            lambda: astore.read(lambda uow: uow.sessions.get("s")),
            lambda: astore.run(lambda: None),
        ]
        errors: list[BaseException] = []
        for call in calls:
            try:
                await call()
            except BaseException as error:  # noqa: BLE001 - what it is, is the question
                errors.append(error)
        await db.close()  # closing twice is harmless
        return errors

    errors = asyncio.run(main())
    assert len(errors) == 8
    assert all(isinstance(error, StoreClosedError) for error in errors), errors
    assert _rows(db_path, "SELECT id FROM sessions") == [("s",)]
    assert _contents(db_path) == []


def test_a_refused_leader_leaves_no_call_queued(db_path: Path) -> None:
    """The root cause: the inbox's workers refuse to lead, and the call stayed queued.

    It was then written by the next caller's group, after its own caller had
    been told it failed.
    """
    with SessionDB(db_path, shared_commits=True) as db:
        db.create_session("s", "cli")
        shared = db.store.shared
        assert shared is not None
        pool = ThreadPoolExecutor(1)
        pool.shutdown()

        async def main() -> BaseException | None:
            writes = LoopWrites(shared, pool)
            future, _ = writes.start(
                lambda uow: uow.messages.append("s", MessageIn("user", "refused")), None
            )
            try:
                await future
            except BaseException as error:  # noqa: BLE001 - checked below
                return error
            return None

        error = asyncio.run(main())
        assert isinstance(error, StoreClosedError), repr(error)
        assert shared.queued == 0
        db.append_message("s", "user", "later")
    assert _contents(db_path) == ["later"]
