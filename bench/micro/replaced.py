"""``python -m bench.micro.replaced [--appends N] [--reps R]``: what the replaced-file check costs.

Before every unit of work the store compares the path's ``stat`` with the
file its connection opened (:mod:`hermes_store.backends.sqlite.file_identity`). Measured two
ways: the check alone (calls per second, no I/O), and appends with the check
against appends with it switched off (``OpenedFiles.replaced`` patched to a
constant for the "off" side), interleaved repetition by repetition on the
same disk as the main benchmark, one commit per append as in its
``append_message`` workload. Prints medians and the range of the per-append
difference; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

from hermes_store import SessionDB
from hermes_store.backends.sqlite.file_identity import OpenedFiles

from ..paths import WORK_ROOT

WORK = WORK_ROOT


def check_alone(path: Path, calls: int = 50_000) -> tuple[float, float]:
    """Seconds per ``replaced()`` call on a file in use (not replaced), and per bare stat."""
    db = SessionDB(path)  # open: its -wal and -shm exist, as for a running agent
    try:
        db.create_session("probe", "cli")
        opened = OpenedFiles.at(str(path))
        started = time.perf_counter()
        for _ in range(calls):
            opened.replaced()
        check = (time.perf_counter() - started) / calls
        name = str(path)
        started = time.perf_counter()
        for _ in range(calls):
            os.stat(name)
        bare = (time.perf_counter() - started) / calls
    finally:
        db.close()
    return check, bare


def appends(path: Path, count: int, *, checked: bool) -> float:
    """Seconds per append of ``count`` one-commit appends, the check on or off."""
    original = OpenedFiles.replaced
    if not checked:
        OpenedFiles.replaced = lambda self: False  # type: ignore[method-assign]
    try:
        db = SessionDB(path)
        db.create_session("s1", "cli")
        db.append_message("s1", "user", "warm up")
        started = time.perf_counter()
        for number in range(count):
            db.append_message("s1", "user", f"message {number} of the replaced-file bench")
        elapsed = time.perf_counter() - started
        db.close()
    finally:
        OpenedFiles.replaced = original  # type: ignore[method-assign]
    return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    work = WORK / "replaced"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        alone = [check_alone(work / f"probe-{n}.db") for n in range(5)]
        print(
            f"check alone: {statistics.median(a for a, _ in alone) * 1e6:.2f} us per unit, "
            f"a bare os.stat {statistics.median(b for _, b in alone) * 1e6:.2f} us "
            "(medians of 5)"
        )
        on: list[float] = []
        off: list[float] = []
        for rep in range(args.reps):
            for checked in (True, False) if rep % 2 == 0 else (False, True):
                path = work / f"append-{rep}-{checked}.db"
                (on if checked else off).append(appends(path, args.appends, checked=checked))
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
        differences = [a - b for a, b in zip(on, off, strict=True)]
        low, _mid, high = statistics.quantiles(differences, n=4, method="inclusive")
        print(
            f"append, {args.appends} x {args.reps} reps: with check "
            f"{statistics.median(on) * 1e3:.3f} ms, without {statistics.median(off) * 1e3:.3f} ms"
            f"; difference per append median {statistics.median(differences) * 1e6:+.1f} us "
            f"(middle half {low * 1e6:+.1f} .. {high * 1e6:+.1f} us), "
            f"ratio {statistics.median(on) / statistics.median(off):.3f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
