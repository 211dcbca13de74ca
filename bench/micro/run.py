"""``python -m bench [--quick] [--json FILE] [--only KEY,...] [--keep]``

Runs the plain-sqlite3 baseline and hermes_store interleaved on the same
disk and prints, per workload, the median time of each, the ratio
store/plain, the target and PASS/MISS; then the peak memory of an export.
The verdict is on wall time. Beside it: the spread of the per-repetition
ratios (a verdict marked ``~`` has the target inside that spread, so another
run may flip it), and the ratio of this process's CPU time (user + system),
which leaves out waiting for the disk and so moves far less from run to run
on a shared machine. No assertion anywhere: a MISS is a finding, not a failure.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..paths import REPO_ROOT, WORK_ROOT
from ..stats import paired_spread
from . import agent_workloads as AW
from . import workloads as W
from .corpus import SEARCH_QUERIES
from .impls import IMPLS


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(workload: W.Workload, ctx: W.Context) -> dict[str, Any]:
    """Warm-up, then ``reps`` repetitions alternating the order plain/store, store/plain."""
    # Results are keyed by role: "store" is the contender (a floor row puts
    # another baseline there).
    roles = [("plain", IMPLS[workload.baseline]), ("store", IMPLS[workload.contender])]
    samples: dict[str, list[float]] = {role: [] for role, _impl in roles}
    extras: dict[str, list[dict[str, Any]]] = {role: [] for role, _impl in roles}
    overhead = [0.0]  # untimed setup + teardown, for the progress log
    # CPU time of this process during each timed run: steadier than wall time on a
    # shared machine, meaningless for the workloads that run in child processes.
    cpu_samples: dict[str, list[float]] = {role: [] for role, _impl in roles}
    for rep in range(-workload.warmup, workload.reps):
        order = roles if rep % 2 == 0 else roles[::-1]
        for role, impl in order:
            t0 = time.perf_counter()
            state = workload.setup(impl, ctx)
            gc.collect()
            t1 = time.perf_counter()
            cpu = time.process_time()
            try:
                elapsed = workload.run(state)
                cpu = time.process_time() - cpu
            finally:
                t2 = time.perf_counter()
                extra = workload.teardown(state)
            overhead[0] += t1 - t0 + time.perf_counter() - t2
            extras[role].append(extra)
            if rep >= 0:
                samples[role].append(elapsed / workload.ops)
                cpu_samples[role].append(cpu / workload.ops)
    log(f"    (untimed setup/teardown {overhead[0]:.1f}s)")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    errors = {name: sum(e.get("errors", 0) for e in extras[name]) for name in samples}
    ratio = medians["store"] / medians["plain"]
    spread = paired_spread(samples["store"], samples["plain"])
    clean = not workload.needs_zero_errors or errors["store"] == 0
    if workload.target is None:
        verdict = "info"
    else:
        verdict = "PASS" if ratio <= workload.target and clean else "MISS"
        if spread is not None and spread[0] <= workload.target < spread[1]:
            verdict += "~"
    result: dict[str, Any] = {
        "workload": workload.key,
        "title": workload.title,
        "size": workload.size,
        "reps": workload.reps,
        "unit": f"per {workload.op_label}",
        "median_s": medians,
        "min_s": {name: min(values) for name, values in samples.items()},
        "samples_s": samples,
        "cpu_median_s": {n: statistics.median(v) for n, v in cpu_samples.items()},
        "cpu_ratio": (
            statistics.median(cpu_samples["store"]) / statistics.median(cpu_samples["plain"])
            if workload.in_process
            else None
        ),
        "ratio": ratio,
        "p95_s": {name: _p95(values) for name, values in samples.items()},
        "load": os.getloadavg()[0],
        "paired_ratio_iqr": spread,
        "target": workload.target,
        "verdict": verdict,
        "errors": errors,
    }
    retries = [e.get("retries") for e in extras["plain"] if e.get("retries") is not None]
    if retries:
        result["plain_retries"] = sum(retries)
    firsts = {n: next((e["first"] for e in extras[n] if e.get("first")), None) for n in samples}
    if any(firsts.values()):
        result["first_error"] = firsts
    if any("identical_output" in e for e in extras["store"]):
        result["identical_output"] = all(
            e.get("identical_output", True) for n in samples for e in extras[n]
        )
    return result


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def cross_check(ctx: W.Context) -> list[str]:
    """Both implementations must answer alike, or the timings compare different work.

    Searches are the one designed difference: plain ranks every match, the
    store ranks within windows of the newest matches (issue #19), so where the
    twenty hits differ the check asks instead that the store return as many
    hits as plain and that each of them be one of plain's matches.
    """
    plain, store = (IMPLS[n].open(ctx.corpus) for n in ("plain", "store"))
    problems = []
    windowed = 0
    try:
        a, b = (db.get_messages(ctx.spec.long_session_id) for db in (plain, store))
        if a != b:
            problems.append("get_messages differ")
        for query in SEARCH_QUERIES:
            a, b = (db.search_messages(query) for db in (plain, store))
            if a == b:
                continue
            matches = _plain_match_ids(plain, query)
            strays = [m["id"] for m in b if m["id"] not in matches]
            if len(a) != len(b) or strays:
                problems.append(
                    f"search {query!r}: {len(b)} hits against {len(a)}, "
                    f"{len(strays)} not matching the query"
                )
            else:
                windowed += 1
    finally:
        plain.close()
        store.close()
    if windowed:
        problems.append(
            f"{windowed} of {len(SEARCH_QUERIES)} searches pick another best "
            "twenty of the same matches (rank windows, by design)"
        )
    return problems


def _plain_match_ids(plain: Any, query: str) -> set[int]:
    """Every message plain's FTS5 index matches for ``query``, ranked or not."""
    from .plain import sanitize_fts5_query

    rows = plain._conn.execute(
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (sanitize_fts5_query(query),)
    )
    return {row[0] for row in rows}


def memory_probes(ctx: W.Context, quick: bool) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    rows = []
    modes = ("iter",) if quick else ("iter", "all")
    for mode in modes:
        for impl in ("plain", "store"):
            row: dict[str, Any] = {"impl": impl, "mode": mode}
            for trace in (False, True):
                out = ctx.work / f"mem-{impl}-{mode}.jsonl"
                args = [sys.executable, "-m", "bench.micro.memprobe", impl, mode, str(ctx.corpus)]
                args += [str(out)] + (["--tracemalloc"] if trace else [])
                done = subprocess.run(
                    args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
                )
                out.unlink(missing_ok=True)
                report = json.loads(done.stdout.strip().splitlines()[-1])
                if trace:
                    row["py_peak_mb"] = report["py_peak_mb"]
                else:
                    row.update(
                        rss_before_mb=report["rss_before_mb"],
                        rss_peak_mb=report["rss_peak_mb"],
                        rss_growth_mb=round(report["rss_peak_mb"] - report["rss_before_mb"], 1),
                        seconds=report["seconds"],
                    )
            rows.append(row)
    return rows


def print_table(results: list[dict[str, Any]]) -> None:
    header = (
        f"{'workload':<40} {'size':<44} {'reps':>4} {'unit':<12} "
        f"{'plain':>10} {'store':>10} {'store/plain':>11} {'spread':>11} {'cpu s/p':>7} "
        f"{'p95 s/p':>7} {'load':>5} {'target':>7}  verdict"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        verdict = r["verdict"]
        errors = r["errors"]
        if any(errors.values()):
            verdict += f"  errors plain={errors['plain']} store={errors['store']}"
        elif r["workload"] == "writers":
            verdict += "  (0 errors)"
        if "plain_retries" in r:
            verdict += f"  plain retries={r['plain_retries']}"
        if r.get("identical_output") is False:
            verdict += "  OUTPUT DIFFERS"
        target = "-" if r["target"] is None else f"<= {r['target']:.1f}"
        cpu = "-" if r["cpu_ratio"] is None else f"{r['cpu_ratio']:.2f}"
        iqr = r["paired_ratio_iqr"]
        spread = "-" if iqr is None else f"{iqr[0]:.2f}-{iqr[1]:.2f}"
        p95 = r["p95_s"]["store"] / r["p95_s"]["plain"]
        print(
            f"{r['title']:<40} {r['size']:<44} {r['reps']:>4} {r['unit']:<12} "
            f"{fmt_time(r['median_s']['plain']):>10} {fmt_time(r['median_s']['store']):>10} "
            f"{r['ratio']:>11.2f} {spread:>11} {cpu:>7} {p95:>7.2f} {r['load']:>5.1f} "
            f"{target:>7}  {verdict}"
        )


def print_memory(rows: list[dict[str, Any]], messages: int) -> None:
    print(f"\nPeak memory, export of {messages:,} messages to JSONL (fresh process each):")
    print(
        f"{'impl':<6} {'mode':<22} {'peak RSS before':>16} {'peak RSS after':>15} "
        f"{'growth':>8} {'tracemalloc peak':>17} {'time':>8}"
    )
    for row in rows:
        mode = "iter_export (stream)" if row["mode"] == "iter" else "export_all (list)"
        print(
            f"{row['impl']:<6} {mode:<22} {row['rss_before_mb']:>13.1f} MB "
            f"{row['rss_peak_mb']:>12.1f} MB {row['rss_growth_mb']:>5.1f} MB "
            f"{row['py_peak_mb']:>14.1f} MB {row['seconds']:>7.2f}s"
        )


def versions() -> dict[str, str]:
    import alembic
    import sqlalchemy

    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlalchemy": sqlalchemy.__version__,
        "alembic": alembic.__version__,
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
    }


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if "--field" in args_in:  # the field-size benchmark of issue #19 has its own options
        from ..field.run import main as field_main

        return field_main([a for a in args_in if a != "--field"])
    if "--field-pg" in args_in:  # issue #28: the field corpus on SQLite and PostgreSQL
        from ..field.pg import main as field_pg_main

        return field_pg_main([a for a in args_in if a != "--field-pg"])
    if "--aio" in args_in:  # the asyncio and shared-commit rows of issue #20
        from .aio import main as aio_main

        return aio_main([a for a in args_in if a != "--aio"])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, < 1 min")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--only", metavar="KEYS", help="comma-separated workloads: " + ",".join(keys())
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the export memory probes")
    parser.add_argument("--keep", action="store_true", help="keep bench/.work/ for inspection")
    parser.add_argument(
        "--field", action="store_true", help="the field-size benchmark: see bench.field"
    )
    parser.add_argument(
        "--aio", action="store_true", help="asyncio and shared-commit rows: see bench.micro.aio"
    )
    parser.add_argument(
        "--field-pg",
        action="store_true",
        help="the field corpus on SQLite and PostgreSQL side by side: see bench.field.pg",
    )
    args = parser.parse_args(args_in)
    sizes = W.QUICK if args.quick else W.DEFAULT
    only = set(args.only.split(",")) if args.only else None
    if only and not only <= set(keys()):
        parser.error(f"unknown workload(s): {', '.join(sorted(only - set(keys())))}")

    started = time.perf_counter()
    work = WORK_ROOT / f"run-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        info = versions()
        print(
            f"hermes_store benchmark ({'quick' if args.quick else 'default'}): "
            + ", ".join(f"{k} {v}" for k, v in info.items())
        )
        print(f"files under {work} (same filesystem as the repo)")
        ctx, facts = W.prepare(sizes, work, REPO_ROOT)
        print(
            f"corpus: {facts['messages']:,} messages in {facts['sessions']:,} sessions "
            f"(one of {sizes.long_session:,}), {facts['file_mb']} MB, built in "
            f"{facts['build_s']}s; matches per query: "
            + ", ".join(f"{q} -> {n:,}" for q, n in facts["matches_per_query"].items())
        )
        problems = cross_check(ctx)
        print("cross-check plain vs store results: " + ("; ".join(problems) or "identical"))
        print()
        results = []
        chosen = {**W.by_key(ctx), **AW.by_key(ctx, only)}
        for workload in chosen.values():
            if only and workload.key not in only:
                continue
            log(f"  running {workload.key} ({workload.reps} reps, interleaved) ...")
            t = time.perf_counter()
            results.append(measure(workload, ctx))
            log(f"    done in {time.perf_counter() - t:.1f}s")
        print_table(results)
        memory = []
        if not args.no_memory and (only is None or "export" in only):
            log("  running export memory probes ...")
            memory = memory_probes(ctx, args.quick)
            print_memory(memory, facts["messages"])
        total = time.perf_counter() - started
        print(f"\nwhole run: {total:.0f}s")
        if args.json:
            payload = {
                "mode": "quick" if args.quick else "default",
                "versions": info,
                "sizes": sizes.__dict__,
                "corpus": facts,
                "cross_check": problems,
                "results": results,
                "export_memory": memory,
                "seconds": total,
            }
            Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
            print(f"results written to {args.json}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            with contextlib.suppress(OSError):  # other runs may be using it
                WORK_ROOT.rmdir()
    return 0


def keys() -> list[str]:
    return [*W.KEYS, *AW.KEYS]


if __name__ == "__main__":
    sys.exit(main())
