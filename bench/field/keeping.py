"""``python -m bench.field.keeping [--sessions N] [--reps N]``: archived left out, at field size.

Issue #30's target: ``list_sessions_rich`` and ``session_count`` with archived
sessions left out (their default) cost what they cost before the flags. The
file: ``--sessions`` sessions (50,000: the field size of bench.field), a
quarter of them children, a tenth of the roots compression chains, 2% archived,
a few pinned, one message each, built once under bench/.work/keeping/.

Each row times the default call and its yardstick in the same run,
interleaved call by call: the same call with ``include_archived=True``, which
takes the code path of before the flags (revision 0011's root indexes, a plain
``COUNT(*)``). Printed: the median and p95 of each, their ratio, the target
and the load average beside each row. No assertion: a MISS is a finding.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3

from ..paths import WORK_ROOT

WORK = WORK_ROOT / "keeping"
LISTING_TARGET_MS = 5.0
COUNT_TARGET_MS = 1.0


def build(path: Path, sessions: int, seed: int = 30) -> None:
    """The file at head, filled with plain INSERTs (the store's triggers keep the totals)."""
    SessionDB(path).close()
    rng = random.Random(seed)
    rows, messages = [], []
    roots: list[str] = []
    for n in range(sessions):
        session_id = f"s{n:06d}"
        started = 1_700_000_000.0 + n * 60
        parent = rng.choice(roots) if roots and rng.random() < 0.25 else None
        archived = 1 if rng.random() < 0.02 else 0
        pinned = 1 if rng.random() < 0.002 else 0
        source = rng.choice(("cli", "cli", "telegram", "discord", "cron"))
        rows.append((session_id, source, parent, started, archived, pinned))
        messages.append((session_id, "user", f"hello from {session_id}", started + 1))
        if parent is None:
            roots.append(session_id)
    with sqlite3.connect(path) as raw:
        raw.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, started_at, archived, pinned) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
            messages,
        )
        for root in rng.sample(roots, len(roots) // 10):  # compression chains
            raw.execute(
                "UPDATE sessions SET end_reason = 'compression', ended_at = started_at + 30 "
                "WHERE id = ?",
                (root,),
            )
        raw.execute(
            "UPDATE sessions SET message_count = "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id)"
        )


def paired(
    reps: int, call: Callable[[], Any], yardstick: Callable[[], Any]
) -> tuple[list[float], list[float], list[float]]:
    """Both calls ``reps`` times, alternating which goes first: wall seconds of each, and
    the CPU seconds of ``call`` (on a loaded machine the wall time is mostly waiting)."""
    ours, theirs, cpu = [], [], []
    for rep in range(reps):
        order = [(call, ours), (yardstick, theirs)]
        for function, times in order if rep % 2 else reversed(order):
            started, cpu_started = time.perf_counter(), time.process_time()
            function()
            times.append(time.perf_counter() - started)
            if times is ours:
                cpu.append(time.process_time() - cpu_started)
    return ours, theirs, cpu


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"keeping-{args.sessions}.db"
    if not path.exists():
        started = time.monotonic()
        build(path, args.sessions)
        print(f"built {path} in {time.monotonic() - started:.0f} s")
    with SessionDB(path, read_only=True) as db:
        live = db.session_count()
        total = db.session_count(include_archived=True)
        roots = len(db.list_sessions_rich(limit=10**6, project_compression_tips=False))
        print(f"{total:,} sessions, {total - live:,} archived; {roots:,} listed roots")
        cases: list[tuple[str, float, Callable[[], Any], Callable[[], Any]]] = [
            (
                "session_count()",
                COUNT_TARGET_MS,
                db.session_count,
                lambda: db.session_count(None, True),
            ),
            (
                "session_count('cli')",
                COUNT_TARGET_MS,
                lambda: db.session_count("cli"),
                lambda: db.session_count("cli", True),
            ),
        ]
        for offset in (0, roots // 2, max(0, roots - 20)):
            cases.append(
                (
                    f"list_sessions_rich(offset={offset:,})",
                    LISTING_TARGET_MS,
                    lambda o=offset: db.list_sessions_rich(limit=20, offset=o),
                    lambda o=offset: db.list_sessions_rich(
                        limit=20, offset=o, include_archived=True
                    ),
                )
            )
        cases.append(
            (
                "list_sessions_rich(source='cli', offset=5,000)",
                LISTING_TARGET_MS,
                lambda: db.list_sessions_rich(source="cli", limit=20, offset=5000),
                lambda: db.list_sessions_rich(
                    source="cli", limit=20, offset=5000, include_archived=True
                ),
            )
        )
        cases.append(
            (
                "list_sessions_rich(include_pinned=True)",
                LISTING_TARGET_MS,
                lambda: db.list_sessions_rich(limit=20, include_pinned=True),
                lambda: db.list_sessions_rich(limit=20, include_archived=True),
            )
        )
        header = f"{'call':46} {'median':>8} {'p95':>8} {'cpu':>7} {'yardstick':>10} {'ratio':>6}"
        print(header + "  target verdict  load")
        for name, target, call, yardstick in cases:
            for _ in range(5):  # warm the page cache and the statement caches
                call()
                yardstick()
            ours, theirs, cpu = paired(args.reps, call, yardstick)
            median, base = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
            verdict = "ok" if median <= target else "MISS"  # p95 is the machine's, loaded
            print(
                f"{name:46} {median:6.2f}ms {p95(ours) * 1e3:6.2f}ms "
                f"{statistics.median(cpu) * 1e3:5.2f}ms {base:8.2f}ms {median / base:6.2f} "
                f"{target:5.1f}ms {verdict:7} {load()}"
            )


if __name__ == "__main__":
    main()
