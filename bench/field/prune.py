"""The prune-wait row: pruning 40,000 sessions while another process appends.

A prune is one write transaction today, so every other writer waits for all
of it. The row runs the store's ``prune_sessions`` on a throwaway copy of the
corpus (the clock set to the corpus's "now", the cutoff chosen so exactly
40,000 ended sessions are older: 80% of the file) while
:mod:`bench.field.appender` appends every 20 ms, and reports the prune's
time and the appender's longest append during it (issue #19's target: no
wait over 200 ms). The yardstick is the old code's prune -- one ``BEGIN
IMMEDIATE``, the ids, the orphaning, a ``DELETE`` per session -- on a fresh
copy with the same appender. Each runs once: a prune cannot be repeated on
the same file, and a copy of a multi-gigabyte file is not free.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .plan import DAY, T_END

PRUNE_SESSIONS = 40_000
"""At 50,000 sessions; a smaller corpus prunes the same share (80%)."""
WAIT_TARGET_S = 0.200
APPEND_EVERY_MS = 20.0
SETTLE_S = 1.0
AFTER_S = 3.0
"""How long the appender goes on after the prune (its next checkpoints fall in here)."""

Log = Callable[[str], None]


def prune_count(sessions: int) -> int:
    return round(PRUNE_SESSIONS * sessions / 50_000)


def cutoff_days(path: Path, count: int) -> tuple[float, int]:
    """``older_than_days`` that selects exactly ``count`` ended sessions, and how many it does."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT started_at FROM sessions WHERE ended_at IS NOT NULL "
            "ORDER BY started_at LIMIT 2 OFFSET ?",
            (count - 1,),
        ).fetchall()
        cutoff = (rows[0][0] + rows[1][0]) / 2 if len(rows) == 2 else rows[0][0] + 1.0
        selected = connection.execute(
            "SELECT COUNT(*) FROM sessions WHERE ended_at IS NOT NULL AND started_at < ?",
            (cutoff,),
        ).fetchone()[0]
    finally:
        connection.close()
    return (T_END - cutoff) / DAY, selected


def copy_corpus(source: Path, target: Path) -> float:
    """Copy the corpus and flush the copy to the disk before anything is timed on it.

    Left to the kernel's writeback, the copy's gigabytes reach the disk while
    the appender runs, and its commits' flushes queue behind them: on the
    1M corpus one append took 2.6 s, before the prune had begun.
    """
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    shutil.copy2(source, target)
    descriptor = os.open(target, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return time.perf_counter() - started


def store_prune(path: Path, days: float) -> int:
    from hermes_store import SessionDB

    db = SessionDB(path, clock=lambda: T_END)
    try:
        return db.prune_sessions(older_than_days=days)
    finally:
        db.close()


def plain_prune(path: Path, days: float) -> int:
    """The old class's prune_sessions: everything in one BEGIN IMMEDIATE ... COMMIT."""
    cutoff = T_END - days * DAY
    connection = sqlite3.connect(str(path), timeout=1.0, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA foreign_keys=ON")
        for _attempt in range(15):
            try:
                connection.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError:
                time.sleep(0.05)
        ids = [
            row[0]
            for row in connection.execute(
                "SELECT id FROM sessions WHERE started_at < ? AND ended_at IS NOT NULL", (cutoff,)
            )
        ]
        for start in range(0, len(ids), 500):  # the old code's IN list, in SQLite's limits
            chunk = ids[start : start + 500]
            connection.execute(
                "UPDATE sessions SET parent_session_id = NULL "
                f"WHERE parent_session_id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
        for session_id in ids:
            connection.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        connection.execute("COMMIT")
        return len(ids)
    finally:
        connection.close()


def _child_env(repo_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo_root), env.get("PYTHONPATH")) if p)
    return env


def prune_while_appending(
    path: Path, days: float, impl: str, repo_root: Path, log: Log
) -> dict[str, Any]:
    """Run one prune with the appender going; what each side saw."""
    appender = subprocess.Popen(
        [sys.executable, "-m", "bench.field.appender", str(path), str(APPEND_EVERY_MS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo_root,
        env=_child_env(repo_root),
    )
    assert appender.stdin is not None and appender.stdout is not None
    try:
        if appender.stdout.readline().strip() != "ready":
            raise RuntimeError("the appender did not start")
        appender.stdin.write("go\n")
        appender.stdin.flush()
        time.sleep(SETTLE_S)
        started = time.monotonic()
        pruned = (store_prune if impl == "store" else plain_prune)(path, days)
        ended = time.monotonic()
        log(f"    {impl} pruned {pruned:,} sessions in {ended - started:.1f}s")
        time.sleep(AFTER_S)
        appender.stdin.write("stop\n")
        appender.stdin.flush()
        report = json.loads(appender.stdout.readline())
    finally:
        appender.stdin.close()
        appender.wait(timeout=120)
    samples = report["samples"]
    before = [d for s, d, *_ in samples if s + d < started]
    overlapping = [sample for sample in samples if sample[0] < ended and sum(sample[:2]) > started]
    during = [sample[1] for sample in overlapping]
    longest = max(overlapping, key=lambda sample: sample[1], default=None)
    after = [d for s, d, *_ in samples if s >= ended]
    return {
        "impl": impl,
        "pruned": pruned,
        "prune_s": ended - started,
        "appends_during": len(during),
        "longest_wait_s": longest[1] if longest else None,
        # When the longest append began, counted from the prune's start.
        "longest_wait_began_s": longest[0] - started if longest else None,
        # Its parts: the wait for the write lock, and the checkpoint after its commit.
        "longest_wait_lock_s": longest[2] if longest else None,
        "longest_wait_checkpoint_s": longest[3] if longest else None,
        "waits_over_100ms": sum(1 for d in during if d > 0.1),
        "slowest_checkpoint_s": max((sample[3] for sample in overlapping), default=None),
        "slowest_lock_wait_s": max((sample[2] for sample in overlapping), default=None),
        # The slowest appends during the prune, each (began after the prune's start, took,
        # of it waiting for the lock, in its checkpoint, in its COMMIT with the checkpoint).
        "slowest_appends": [
            (round(sample[0] - started, 3), *(round(part, 4) for part in sample[1:]))
            for sample in sorted(overlapping, key=lambda x: -x[1])[:20]
        ],
        "waits_over_200ms": sum(1 for d in during if d > 0.2),
        "append_median_before_s": statistics.median(before) if before else None,
        "longest_append_after_s": max(after) if after else None,
        "appends_after": len(after),
        "appender_errors": report["errors"][:3],
        "appender_error_count": len(report["errors"]),
        "target_s": WAIT_TARGET_S,
    }
