"""Writers killed with SIGKILL mid-burst: the file reopens whole, nothing committed lost."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.check import check
from tests.support.paths import SUPPORT

pytestmark = pytest.mark.sqlite_only("a SQLite file reopened after SIGKILLed writers")

WORKER = SUPPORT / "crash_worker.py"
WRITERS = 3
ROUNDS = 4


def _kill_after(proc: subprocess.Popen[str], seconds: float) -> list[list[int]]:
    """SIGKILL ``proc`` ``seconds`` after its first confirmed turn; the turns it confirmed.

    Counting from its first turn, not from ``ready``, so that a writer slow to
    get the CPU is never killed before it committed anything.
    """
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    first = proc.stdout.readline()
    time.sleep(seconds)
    proc.send_signal(signal.SIGKILL)
    out, _err = proc.communicate()
    turns = []
    for line in [first, *out.splitlines()]:
        numbers = line.split()
        if len(numbers) == 4:  # a line cut by the kill is not a confirmed commit
            turns.append([int(n) for n in numbers[1:]])
    return turns


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_sigkilled_writers_leave_a_consistent_file(db_path: Path, durability: str) -> None:
    """Either durability: a killed process loses nothing it was told was committed.

    (``normal`` differs only on an operating-system crash or power loss,
    which a test cannot cause; a process kill leaves its commits in the OS.)
    """
    rng = random.Random(20261202)
    with SessionDB(db_path) as db:
        for n in range(WRITERS):
            db.create_session(f"w{n}", "cli")
    confirmed: list[list[int]] = []
    kills = 0
    for _round in range(ROUNDS):
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), str(db_path), f"w{n}", durability],
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(WRITERS)
        ]
        for proc in procs:
            confirmed += _kill_after(proc, rng.uniform(0.05, 0.4))
            kills += 1
    assert kills == WRITERS * ROUNDS
    assert len(confirmed) >= WRITERS * ROUNDS, "each writer must have confirmed a turn"

    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    present = {row[0] for row in raw.execute("SELECT id FROM messages")}
    lost = [ids for ids in confirmed if not set(ids) <= present]
    assert lost == [], f"{len(lost)} confirmed turns are missing"
    # No partial turn: messages come in whole turns of three per session.
    for (session_id,) in raw.execute("SELECT id FROM sessions"):
        roles = [
            r
            for (r,) in raw.execute(
                "SELECT role FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
            )
        ]
        assert len(roles) % 3 == 0
        assert roles == ["user", "assistant", "tool"] * (len(roles) // 3)
        count, calls = raw.execute(
            "SELECT message_count, tool_call_count FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        assert (count, calls) == (len(roles), 2 * len(roles) // 3)
    raw.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    searchable = raw.execute(
        "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'crashword'"
    ).fetchone()[0]
    assert searchable == len(present) // 3
    raw.close()

    store = Store(db_path)
    report = check(store)
    assert report.ok, report
    store.close()
