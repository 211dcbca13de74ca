"""One writer process of the contention workload.

``python -m bench.micro.writer IMPL DB SESSION_ID N SEED``: opens the database,
prints ``ready``, waits for a line on stdin, then appends N messages (one
commit each) to its session and prints one JSON line: its monotonic start and
end (the clock is system-wide on Linux, so the parent can compare them across
processes), how many appends failed, and the plain baseline's retry count.
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .corpus import sample_turns
from .impls import IMPLS


class _LockClock:
    """Times how long each append holds the write lock (BEGIN IMMEDIATE done -> call returned).

    Only with ``BENCH_HOLD=1`` (``python -m bench.micro.profile writers``): wraps the
    store's ``SqliteRules.begin``, or the baseline's connection; a few clock
    calls per append. The clock is the system-wide monotonic one, so the
    parent can line the holds of all writers up (see ``relay``).
    """

    def __init__(self) -> None:
        self.locked_at = 0.0
        self.holds: list[float] = []
        self.spans: list[tuple[float, float]] = []

    def got_lock(self, *_args: object) -> None:
        self.locked_at = time.monotonic()

    def released(self) -> None:
        if self.locked_at:
            now = time.monotonic()
            self.holds.append(now - self.locked_at)
            self.spans.append((self.locked_at, now))
            self.locked_at = 0.0

    def install(self, impl_name: str, db: object) -> None:
        if impl_name.startswith("store"):
            from hermes_store.backends.sqlite.engine import SqliteRules

            # Units of work begin on the driver through SqliteRules.begin: time
            # from its return, i.e. with the lock held. (This child process only.)
            begin = SqliteRules.begin

            def timed_begin(rules: SqliteRules, *args: Any, **kwargs: Any) -> None:
                begin(rules, *args, **kwargs)
                if kwargs.get("write"):
                    self.got_lock()

            SqliteRules.begin = timed_begin  # type: ignore[method-assign]
        else:
            clock = self

            class Timed:
                def __init__(self, inner: object) -> None:
                    self._inner = inner

                def execute(self, sql: str, *args: object) -> object:
                    result = self._inner.execute(sql, *args)  # type: ignore[attr-defined]
                    if sql == "BEGIN IMMEDIATE":
                        clock.got_lock()
                    return result

                def __getattr__(self, name: str) -> object:
                    return getattr(self._inner, name)

            db._conn = Timed(db._conn)  # type: ignore[attr-defined]

    def summary(self) -> dict[str, float]:
        holds = sorted(self.holds)
        if not holds:
            return {}
        return {
            "hold_ms_median": round(1000 * holds[len(holds) // 2], 3),
            "hold_ms_p90": round(1000 * holds[int(len(holds) * 0.9)], 3),
            "hold_ms_sum": round(1000 * sum(holds), 1),
            "spans": self.spans,
        }


def main(argv: list[str]) -> int:
    impl_name, db_path, session_id, count, seed = argv
    impl = IMPLS[impl_name]
    messages = [m for turn in sample_turns(8, seed=int(seed)) for m in turn]
    db = impl.open(Path(db_path))
    # One untimed append first: a long-running agent has its statements prepared (plain)
    # or compiled (store) already; the parent counts this message too.
    db.append_message(session_id, "user", content="warm up")
    clock = _LockClock() if os.environ.get("BENCH_HOLD") else None
    if clock is not None:
        clock.install(impl_name, db)
    print("ready", flush=True)
    sys.stdin.readline()
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")  # set by python -m bench.micro.profile
    profiler = cProfile.Profile() if profile_dir else None
    if profiler is not None:
        profiler.enable()
    errors = 0
    first_error = None
    started = time.monotonic()
    for index in range(int(count)):
        try:
            db.append_message(session_id, **messages[index % len(messages)])
        except Exception as error:  # counted, reported, never fatal
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {error}"
        if clock is not None:
            clock.released()
    ended = time.monotonic()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.path.join(profile_dir, f"writer-{impl_name}-{session_id}.prof"))
    db.close()
    result = {
        "t0": started,
        "t1": ended,
        "errors": errors,
        "first_error": first_error,
        "retries": getattr(db, "retries", None),
        **(clock.summary() if clock is not None else {}),
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def relay(reports: list[dict[str, object]]) -> dict[str, float]:
    """How the lock travelled between writers, and where the run's wall time went.

    ``again``: share of lock takes by the writer that released it just before;
    ``gap_us_median``: median time from a release to the next take;
    ``handoffs``: takes by another writer; ``hold_after_handoff_ms`` and
    ``hold_steady_ms``: median hold of an append right after a hand-off and of
    one that kept the lock (the difference is what a hand-off costs: the new
    holder's page cache starts cold); ``idle_short_ms`` / ``idle_long_ms``:
    lock idle between appends of one stretch (< 1 ms, the holder's own Python)
    and while every other writer slept in its back-off (>= 1 ms).
    A hold runs from ``BEGIN IMMEDIATE`` to the append's return, so it
    includes the post-commit checkpoint every 50 commits.
    """
    spans = sorted(
        (start, end, writer)
        for writer, report in enumerate(reports)
        for start, end in report.get("spans", [])  # type: ignore[union-attr]
    )
    if len(spans) < 2:
        return {}
    pairs = list(zip(spans, spans[1:], strict=False))
    gaps = sorted(after[0] - before[1] for before, after in pairs)
    after_handoff = sorted(a[1] - a[0] for b, a in pairs if b[2] != a[2])
    steady = sorted(a[1] - a[0] for b, a in pairs if b[2] == a[2])

    def median_ms(values: list[float]) -> float:
        return round(1e3 * values[len(values) // 2], 3) if values else float("nan")

    return {
        "again": round(len(steady) / len(pairs), 3),
        "gap_us_median": round(1e6 * gaps[len(gaps) // 2]),
        "handoffs": len(after_handoff),
        "hold_after_handoff_ms": median_ms(after_handoff),
        "hold_steady_ms": median_ms(steady),
        "idle_short_ms": round(1e3 * sum(g for g in gaps if 0 < g < 1e-3), 2),
        "idle_long_ms": round(1e3 * sum(g for g in gaps if g >= 1e-3), 2),
    }
