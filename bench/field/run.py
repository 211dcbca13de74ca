"""``python -m bench.field [--small] [--json FILE] [--only SECTIONS]`` (= ``bench --field``)

The field-size benchmark of issue #19: a million messages in 50,000 sessions
(``--small``: 100,000 in 5,000), built once and kept under bench/.work/field/.
Sections: ``search`` (every query class of bench.field.queries, unfiltered and
filtered, store vs the plain FTS5 yardstick), ``listing`` (listings, reports,
titles, lineage), ``cli`` (hermes-store start-up against ``import
sqlalchemy``), ``prune`` (prune 80% of the sessions while another process
appends; then the space an optimize gives back). Targets are the issue's,
absolute for search and listings, so a row judges the store's own p95 or
median; store/plain and the spread of the paired ratios are printed beside
it. No assertion anywhere: a MISS is a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..paths import REPO_ROOT
from .corpus import FULL, SMALL, WORK, ensure
from .queries import CLASSES
from .rows import Reps, Row

SECTIONS = ("search", "listing", "cli", "prune")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.1f}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def versions() -> dict[str, str]:
    import sqlalchemy

    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlalchemy": sqlalchemy.__version__,
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
    }


def describe_corpus(facts: dict[str, Any], built: bool) -> str:
    v = facts["vocabulary"]
    kinds = facts["sessions_by_kind"]
    return (
        f"corpus: {facts['messages']:,} messages in {facts['sessions']:,} sessions over "
        f"{facts['days']} days, {facts['file_bytes'] / 1e9:.2f} GB "
        f"({'built now' if built else 'kept'}: build {facts['timings_s']['build_s']:.0f}s, "
        f"verify {facts['timings_s']['verify_s']:.0f}s)\n"
        f"  text: {v['latin_words']:,} Latin words (Zipf), {v['chinese_words']:,} Chinese words, "
        f"{v['identifiers']:,} identifiers, {v['paths']:,} paths; "
        f"mean content {facts['mean_content_chars']} chars; "
        f"CJK {facts['cjk_share']:.1%} of messages; tool rows {facts['tool_row_share']:.1%}, "
        f"assistant rows with tool_calls {facts['tool_calls_rows'] / facts['messages']:.1%}\n"
        f"  sessions: {', '.join(f'{k} {n:,}' for k, n in kinds.items())}; "
        f"{facts['compression_chains']:,} compression chains; open {facts['open_sessions']:,}; "
        f"titled {facts['titled_sessions']:,} (largest lineage "
        f"{facts['largest_title_lineage']['sessions']:,}); longest session "
        f"{facts['longest_session_messages']:,} messages"
    )


def print_rows(title: str, rows: list[Row], with_matches: bool) -> None:
    print(f"\n{title}")
    header = (
        f"{'row':<30} {'variant':<16} "
        + (f"{'matches':>9} " if with_matches else "")
        + f"{'hits s/p':>9} {'results':<16} {'plain med':>9} {'p95':>7} "
        f"{'store med':>9} {'p95':>7} {'s/p':>6} {'spread':>11} {'reps':>4} {'target':>9}  verdict"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        hits = "-" if r.store_hits is None else f"{r.store_hits}/{r.plain_hits}"
        iqr = r.spread
        spread = "-" if iqr is None else f"{iqr[0]:.2f}-{iqr[1]:.2f}"
        target = "-" if r.target_s is None else f"{r.judged_on} {ms(r.target_s)}"
        matches = f"{r.matches:>9,} " if with_matches and r.matches is not None else ""
        print(
            f"{r.label:<30} {r.variant:<16} {matches}{hits:>9} {r.agreement:<16} "
            f"{ms(r.median('plain')):>9} {ms(r.p95('plain')):>7} "
            f"{ms(r.median('store')):>9} {ms(r.p95('store')):>7} {r.ratio:>6.2f} "
            f"{spread:>11} {len(r.store_s):>4} {target:>9}  {r.verdict}"
        )


def print_cli(rows: list[dict[str, Any]]) -> None:
    print(
        "\nCLI start: wall time of a new process, median over the repetitions; "
        "CPU: the process's user+system time (what load does not stretch)"
    )
    header = f"{'command':<48} {'median':>8} {'p95':>8} {'/import sqlalchemy':>19} "
    header += f"{'CPU':>7} {'CPU ratio':>9} {'target':>7}  verdict"
    print(header)
    print("-" * len(header))
    for r in rows:
        target = "-" if r["target"] is None else f"<= {r['target']:.1f}"
        print(
            f"{r['command']:<48} {ms(r['median_s']):>6}ms {ms(r['p95_s']):>6}ms "
            f"{r['ratio']:>19.2f} {ms(r['cpu_median_s']):>5}ms {r['cpu_ratio']:>9.2f} "
            f"{target:>7}  {r['verdict']}"
        )


def print_prune(results: list[dict[str, Any]], optimize: list[dict[str, Any]]) -> None:
    print("\nPrune while another process appends every 20 ms (one run each, on a copy)")
    header = (
        f"{'prune':<34} {'sessions':>8} {'prune time':>10} {'appends':>7} "
        f"{'longest append':>14} {'append before':>13} {'longest after':>13} {'target':>9}  verdict"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        label = "SessionDB.prune_sessions" if r["impl"] == "store" else "plain: old prune_sessions"
        wait = r["longest_wait_s"]
        # The target is how long another writer waits: for the lock. An append's own work
        # (its FTS5 merges, its flush) is printed beside it, not judged by it.
        lock = r.get("slowest_lock_wait_s", wait)
        if r["impl"] != "store":
            verdict = "yardstick"
        else:
            verdict = "PASS" if lock is not None and lock <= r["target_s"] else "MISS"
            verdict += f" (longest lock wait {ms(lock)}ms)"
        if r.get("longest_wait_began_s") is not None:
            began = r["longest_wait_began_s"]
            verdict += f"  (the longest append began {began:.1f}s into the prune)"
        if r["appender_error_count"]:
            verdict += f"  appender errors {r['appender_error_count']}: {r['appender_errors'][0]}"
        print(
            f"{label:<34} {r['pruned']:>8,} {r['prune_s']:>9.1f}s {r['appends_during']:>7} "
            f"{ms(wait):>12}ms {ms(r['append_median_before_s']):>11}ms "
            f"{ms(r['longest_append_after_s']):>11}ms {'<= ' + ms(r['target_s']) + 'ms':>9}  "
            f"{verdict}"
        )
        if r.get("longest_wait_lock_s") is not None:
            print(
                f"{'':<34} longest: {ms(r['longest_wait_lock_s'])}ms waiting for the lock, "
                f"{ms(r['longest_wait_checkpoint_s'])}ms in its checkpoint; "
                f"{r['waits_over_100ms']} appends over 100ms, {r['waits_over_200ms']} over 200ms; "
                f"slowest lock wait {ms(r['slowest_lock_wait_s'])}ms, slowest checkpoint "
                f"{ms(r['slowest_checkpoint_s'])}ms"
            )
            for began, took, lock, checkpoint, commit in r["slowest_appends"][:5]:
                print(
                    f"{'':<34}   at {began:7.1f}s: {ms(took)}ms = lock {ms(lock)}ms + "
                    f"commit {ms(commit)}ms (checkpoint {ms(checkpoint)}ms) + the rest"
                )
    if not optimize:
        return
    print("\nOptimize the pruned copy: plain sqlite3, step by step (no store command yet)")
    header = f"{'step':<36} {'seconds':>8} {'file':>10} {'free pages':>11} {'given back':>11}"
    print(header)
    print("-" * len(header))
    first = optimize[0]["file_bytes"]
    for step in optimize:
        print(
            f"{step['step']:<36} {step['seconds']:>8.1f} {step['file_bytes'] / 1e6:>8.0f}MB "
            f"{step['free_bytes'] / 1e6:>9.0f}MB {(first - step['file_bytes']) / 1e6:>9.0f}MB"
        )


def run_prune(
    corpus: Path, facts: dict[str, Any], plain_too: bool, optimize: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from .optimize import optimize_steps
    from .prune import copy_corpus, cutoff_days, prune_count, prune_while_appending

    days, selected = cutoff_days(corpus, prune_count(facts["sessions"]))
    log(f"    older_than_days={days:.3f} selects {selected:,} ended sessions")
    copy = WORK / f"prune-copy-{os.getpid()}.db"
    results, steps = [], []
    try:
        for impl in ("store", "plain") if plain_too else ("store",):
            seconds = copy_corpus(corpus, copy)
            log(f"    copied the corpus in {seconds:.0f}s")
            results.append(prune_while_appending(copy, days, impl, REPO_ROOT, log))
            if impl == "store" and optimize:
                steps = optimize_steps(copy)
                log(f"    optimize steps done ({sum(s['seconds'] for s in steps):.0f}s)")
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return results, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.field", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--small", action="store_true", help="100,000 messages in 5,000 sessions")
    parser.add_argument("--json", metavar="FILE", help="also write every sample as JSON")
    parser.add_argument("--only", metavar="SECTIONS", help="comma-separated: " + ",".join(SECTIONS))
    parser.add_argument(
        "--classes", metavar="KEYS", help="search classes: " + ",".join(c.key for c in CLASSES)
    )
    parser.add_argument("--reps", type=int, default=7, help="minimum repetitions per row")
    parser.add_argument("--max-reps", type=int, default=41, help="for fast rows, within --budget")
    parser.add_argument(
        "--budget", type=float, default=6.0, help="seconds per row before stopping at --reps"
    )
    parser.add_argument("--cli-reps", type=int, default=9)
    parser.add_argument(
        "--no-plain-prune",
        action="store_true",
        help="skip the yardstick's prune (saves a copy and a prune)",
    )
    parser.add_argument("--no-optimize", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the corpus first")
    args = parser.parse_args(argv)
    sections = args.only.split(",") if args.only else list(SECTIONS)
    if not set(sections) <= set(SECTIONS):
        parser.error(f"unknown section(s): {', '.join(sorted(set(sections) - set(SECTIONS)))}")
    classes = CLASSES
    if args.classes:
        keys = args.classes.split(",")
        classes = tuple(c for c in CLASSES if c.key in keys)
        if len(classes) != len(keys):
            parser.error("unknown class in --classes")
    spec = SMALL if args.small else FULL
    reps = Reps(min_reps=args.reps, max_reps=max(args.reps, args.max_reps), budget_s=args.budget)

    started = time.perf_counter()
    info = versions()
    load_before = load_average()
    print(
        f"hermes_store field benchmark ({'small' if args.small else 'full'}): "
        + ", ".join(f"{k} {v}" for k, v in info.items())
    )
    print(f"load average (1, 5, 15 min) at start: {load_before}")
    t = time.perf_counter()
    corpus, facts = ensure(spec, rebuild=args.rebuild, log=log)
    built = time.perf_counter() - t > 30
    print(describe_corpus(facts, built))
    print(f"  file: {corpus}")
    payload: dict[str, Any] = {
        "mode": "small" if args.small else "full",
        "versions": info,
        "corpus": facts,
        "load_before": load_before,
        "sections": {},
    }

    search_rows: list[Row] = []
    listing: list[Row] = []
    if "search" in sections or "listing" in sections:
        from hermes_store import SessionDB

        from .plain import PlainField
        from .search import listing_rows
        from .search import search_rows as run_search

        db, plain = SessionDB(corpus), PlainField(corpus)
        try:
            if "search" in sections:
                log("  search rows ...")
                search_rows = run_search(db, plain, reps, log, classes)
            if "listing" in sections:
                log("  listing rows ...")
                listing = listing_rows(db, plain, corpus, reps, log)
        finally:
            db.close()
            plain.close()
    if search_rows:
        print_rows(
            "Search: SessionDB.search_messages vs plain FTS5 (MATCH ORDER BY rank LIMIT 20 "
            "+ context); p95 nearest-rank (with 7 reps: the slowest); times in ms",
            search_rows,
            with_matches=True,
        )
        payload["sections"]["search"] = [r.as_json() for r in search_rows]
    if listing:
        print_rows(
            "Listings and reports (old class's SQL on plain sqlite3); times in ms", listing, False
        )
        payload["sections"]["listing"] = [r.as_json() for r in listing]
    if "cli" in sections:
        from .cli import cli_rows, small_current_file

        log("  CLI start rows ...")
        small = small_current_file(WORK / f"cli-small-{os.getpid()}.db")
        try:
            cli = cli_rows(
                {"field file": corpus, "small file": small}, args.cli_reps, REPO_ROOT, log
            )
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{small}{suffix}").unlink(missing_ok=True)
        print_cli(cli)
        payload["sections"]["cli"] = cli
    if "prune" in sections:
        log("  prune rows ...")
        prune, steps = run_prune(corpus, facts, not args.no_plain_prune, not args.no_optimize)
        print_prune(prune, steps)
        payload["sections"]["prune"] = prune
        payload["sections"]["optimize"] = steps
    load_after = load_average()
    total = time.perf_counter() - started
    print(f"\nload average at end: {load_after}; whole run {total:.0f}s")
    payload.update(load_after=load_after, seconds=total)
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
