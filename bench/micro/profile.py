"""Profile the store side of one workload: ``python -m bench.micro.profile KEY [options]``.

Builds the same files as ``python -m bench`` (``--quick`` sizes with
``--quick``), runs only hermes_store's repetitions of workload KEY under
cProfile (setup and teardown are not profiled) and prints the heaviest
functions by cumulative and by own time. For ``writers`` every writer process
profiles itself and the stats are added up. ``--impl plain`` profiles the
baseline instead, for comparison.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys

from ..paths import REPO_ROOT, WORK_ROOT
from . import workloads as W
from .impls import IMPLS
from .writer import relay


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.profile")
    parser.add_argument("key", choices=W.KEYS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--impl", choices=("store", "plain"), default="store")
    parser.add_argument("--reps", type=int, default=None, help="repetitions to profile")
    parser.add_argument("--limit", type=int, default=35, help="rows per listing")
    parser.add_argument("--save", metavar="FILE", help="also write the pstats file")
    parser.add_argument(
        "--no-cprofile",
        action="store_true",
        help="writers only: time the lock holds and the relay without cProfile's overhead",
    )
    args = parser.parse_args(argv)
    sizes = W.QUICK if args.quick else W.DEFAULT
    work = WORK_ROOT / f"profile-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        ctx, _facts = W.prepare(sizes, work, REPO_ROOT)
        workload = W.by_key(ctx)[args.key]
        impl = IMPLS[args.impl]
        reps = args.reps or max(1, min(workload.reps, 5))
        profile_dir = work / "prof"
        profile_dir.mkdir()
        profiler = cProfile.Profile()
        holds: list[dict[str, float]] = []
        runs: list[list[dict[str, object]]] = []  # each repetition's writer reports
        for rep in range(reps + 1):  # the first repetition warms up, unprofiled
            if args.key == "writers" and rep > 0:
                if not args.no_cprofile:
                    os.environ["BENCH_PROFILE_DIR"] = str(profile_dir)
                os.environ["BENCH_HOLD"] = "1"
            state = workload.setup(impl, ctx)
            try:
                if rep > 0 and args.key != "writers":
                    profiler.enable()
                workload.run(state)
            finally:
                profiler.disable()
                workload.teardown(state)
            os.environ.pop("BENCH_PROFILE_DIR", None)
            os.environ.pop("BENCH_HOLD", None)
            if args.key == "writers" and rep > 0:
                holds.extend(state.get("reports", []))
                runs.append(state.get("reports", []))
        if args.key == "writers":
            under = "without cProfile" if args.no_cprofile else "under cProfile"
            print(f"write-lock hold per append, per writer process (ms, {under}):")
            for report in holds:
                print(
                    f"  median {report.get('hold_ms_median')}  p90 {report.get('hold_ms_p90')}"
                    f"  sum {report.get('hold_ms_sum')}  wall {report['t1'] - report['t0']:.2f}s"
                )
            for run in runs:
                passed = relay(run)
                print(
                    f"lock taken again by the writer that released it: {passed.get('again')}; "
                    f"median release-to-take gap {passed.get('gap_us_median')} us; "
                    f"{passed.get('handoffs')} hand-offs (hold after one "
                    f"{passed.get('hold_after_handoff_ms')} ms, otherwise "
                    f"{passed.get('hold_steady_ms')} ms); lock idle "
                    f"{passed.get('idle_short_ms')} ms within stretches, "
                    f"{passed.get('idle_long_ms')} ms while the others slept"
                )
            if args.no_cprofile:
                return 0
            stats = pstats.Stats(*sorted(str(p) for p in profile_dir.glob("*.prof")))
        else:
            stats = pstats.Stats(profiler)
        print(f"{args.impl} side of {args.key}: {reps} repetition(s), {workload.size}")
        if args.save:
            stats.dump_stats(args.save)
        stats.strip_dirs()
        stats.sort_stats("cumulative").print_stats(args.limit)
        stats.sort_stats("tottime").print_stats(args.limit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
