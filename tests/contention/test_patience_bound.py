"""A write's patience is its bound: it fails (or succeeds) within it, whatever it waited for.

Another process holds the write lock (``tests/support/lock_holder.py``). The bounds
checked are the patience plus a generous slack (0.5 s or more), far below
what the calls took before: five asyncio writes of one session, patience
1 s, failed after 1, 2, 3, 4 and 5 s (each got a fresh patience when its
turn came); a lone ``BEGIN IMMEDIATE`` retry begun near the end waited one
more whole busy timeout (patience 2.3 s: 3.0-3.3 s).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hermes_store import ContentionPolicy, Store, StoreLockedError
from hermes_store.aio import AsyncSessionDB
from tests.support.paths import SUPPORT

pytestmark = pytest.mark.sqlite_only("another process holding SQLite's write lock")

HOLDER = SUPPORT / "lock_holder.py"


@contextmanager
def _lock_held(path: Path, seconds: float) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, str(HOLDER), str(path), str(seconds)], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"locked"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_writes_queued_for_their_session_fail_within_their_own_patience(db_path: Path) -> None:
    patience = 1.0

    async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[object, float]:
        started = time.monotonic()
        try:
            outcome: object = await call()
        except Exception as error:  # noqa: BLE001 - the outcome is what is checked
            outcome = error
        return outcome, time.monotonic() - started

    async def main() -> list[tuple[object, float]]:
        db = await AsyncSessionDB.open(db_path, policy=ContentionPolicy(patience_s=patience))
        await db.create_session("s", "cli")
        with _lock_held(db_path, 4 * patience):
            calls: list[Callable[[], Awaitable[Any]]] = [
                *(lambda: db.update_token_counts("s", input_tokens=1) for _ in range(5)),
                *(lambda k=k: db.append_message("s", "user", f"m{k}") for k in range(5)),
            ]
            outcomes = await asyncio.gather(*(timed(call) for call in calls))
        await db.close()
        return outcomes

    outcomes = asyncio.run(main())
    for outcome, took in outcomes:
        assert isinstance(outcome, StoreLockedError), repr(outcome)
        assert took < patience + 0.6, f"failed after {took:.2f} s at a patience of {patience} s"


def test_a_lock_wait_ends_with_its_patience_not_a_busy_timeout_later(db_path: Path) -> None:
    """Patience 2.3 s, busy timeout 1 s: the third attempt begins at 2.04-2.30 s."""
    patience = 2.3
    store = Store(db_path, shared_commits=True)
    store.transact(lambda uow: uow.sessions.create("s", "cli"))
    with _lock_held(db_path, patience + 3):
        started = time.monotonic()
        with pytest.raises(StoreLockedError):
            store.transact(lambda uow: uow.sessions.end("s", "done"), patience_s=patience)
        took = time.monotonic() - started
    store.close()
    assert took < patience + 0.5, f"failed after {took:.2f} s at a patience of {patience} s"
