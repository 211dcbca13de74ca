"""``python -m bench.experiments.listing_floor [--reps N] [--before FILE]``

Revision 0011's rows, before/after.

Issue #19 item 3 on the million-message field corpus: the reports and
listings revision 0011 changed, each timed three ways in one run,
interleaved call by call:

* ``after``: ``SessionDB`` on the corpus at our head (kept totals, the
  partial index of roots);
* ``before``: ``SessionDB`` read-only on a copy of the same rows at
  revision 0010 (``--before``; by default the corpus this one was derived
  from): the exact aggregates and the full listing index, the same code;
* ``floor``: the bare SQL of the step that costs on plain ``sqlite3``: the
  index walk to the OFFSET (with and without the per-entry test), the
  ``COUNT(*)``, the kept rows.

Each cell is the median wall time and, beside it, the median CPU time of
this process (``time.process_time``): on a loaded machine the wall time
waits for a core, the CPU time does not. Run it under the shared lock
(``flock /tmp/hermes-bench.lock``).

What it showed: with revision 0011's kept totals and partial index every listing and
report of issue #19 is within its target at any offset, close to the bare SQL of its
costly step. Figures and the decision: docs/design/listings.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..field.corpus import FULL, SMALL, ensure

Timed = dict[str, tuple[float, float]]


def _sample(call: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def measure(calls: dict[str, Callable[[], Any]], reps: int) -> tuple[Timed, dict[str, Any]]:
    """Median (wall, cpu) per name, the calls interleaved; one untimed warm-up each."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    results = {name: call() for name, call in calls.items()}
    names = list(calls)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            wall, cpu, results[name] = _sample(calls[name])
            samples[name].append((wall, cpu))
    medians = {
        name: (
            statistics.median(w for w, _ in values),
            statistics.median(c for _, c in values),
        )
        for name, values in samples.items()
    }
    return medians, results


def _older(corpus: Path) -> Path | None:
    facts = corpus.with_suffix(".json")
    derived = json.loads(facts.read_text(encoding="utf-8")).get("derived_from")
    return corpus.with_name(derived["file"]) if derived else None


def main(argv: list[str] | None = None) -> int:
    from hermes_store import SessionDB

    parser = argparse.ArgumentParser(prog="python -m bench.experiments.listing_floor")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--before", type=Path, help="the same rows at revision 0010")
    args = parser.parse_args(argv)
    corpus, _facts = ensure(SMALL if args.small else FULL)
    before_path = args.before or _older(corpus)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"after: {corpus.name}\nbefore: {before_path.name if before_path else '-'}")

    after = SessionDB(corpus)
    before = SessionDB(before_path, read_only=True) if before_path else None
    plain = sqlite3.connect(f"file:{corpus}?mode=ro", uri=True)
    one = lambda sql, *a: plain.execute(sql, a).fetchone()[0]  # noqa: E731
    roots = one("SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NULL")
    offsets = (0, roots // 2, max(0, roots - 20))

    def walk(sql: str, offset: int) -> Callable[[], Any]:
        return lambda: plain.execute(sql, (offset,)).fetchall()

    old_walk = (
        "SELECT s.id FROM sessions s WHERE +s.parent_session_id IS NULL "
        "ORDER BY s.started_at DESC LIMIT 20 OFFSET ?"
    )
    new_walk = (
        "SELECT s.id FROM sessions s INDEXED BY idx_sessions_roots_listing "
        "WHERE s.parent_session_id IS NULL ORDER BY s.started_at DESC LIMIT 20 OFFSET ?"
    )
    bare_walk = (
        "SELECT s.id FROM sessions s INDEXED BY idx_sessions_listing "
        "ORDER BY s.started_at DESC LIMIT 20 OFFSET ?"
    )
    groups: list[tuple[str, dict[str, Callable[[], Any]]]] = [
        (
            "message_count()",
            {
                "after": after.message_count,
                **({"before": before.message_count} if before else {}),
                "floor COUNT(*)": lambda: one("SELECT COUNT(*) FROM messages"),
                "floor kept row": lambda: one("SELECT messages FROM message_total"),
            },
        ),
        (
            "token_usage_by_model()",
            {
                "after": after.token_usage_by_model,
                **({"before": before.token_usage_by_model} if before else {}),
                "floor GROUP BY": lambda: plain.execute(
                    "SELECT model, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
                    "SUM(estimated_cost_usd) FROM sessions WHERE model IS NOT NULL "
                    "GROUP BY model"
                ).fetchall(),
                "floor kept rows": lambda: plain.execute(
                    "SELECT * FROM model_usage_totals"
                ).fetchall(),
            },
        ),
    ]
    for offset in offsets:
        groups.append(
            (
                f"list_sessions_rich offset {offset:,}",
                {
                    "after": lambda o=offset: after.list_sessions_rich(limit=20, offset=o),
                    **(
                        {"before": lambda o=offset: before.list_sessions_rich(limit=20, offset=o)}
                        if before
                        else {}
                    ),
                    "floor old walk (+test)": walk(old_walk, offset),
                    "floor roots index walk": walk(new_walk, offset),
                    "floor bare walk, all": walk(bare_walk, offset),
                },
            )
        )
    base = one(
        "SELECT substr(title, 1, instr(title, ' #') - 1) AS base FROM sessions "
        "WHERE title LIKE '% #%' GROUP BY base ORDER BY COUNT(*) DESC, base LIMIT 1"
    )
    groups += [
        (
            "resolve_session_by_title (largest lineage)",
            {
                "after": lambda: after.resolve_session_by_title(base),
                **({"before": lambda: before.resolve_session_by_title(base)} if before else {}),
            },
        ),
        (
            "get_next_title_in_lineage (largest lineage)",
            {
                "after": lambda: after.get_next_title_in_lineage(base),
                **({"before": lambda: before.get_next_title_in_lineage(base)} if before else {}),
            },
        ),
    ]
    print(f"\n{'row':<44} {'variant':<24} {'wall ms':>9} {'cpu ms':>8}  same as before")
    for label, calls in groups:
        medians, results = measure(calls, args.reps)
        for name, (wall, cpu) in medians.items():
            same = ""
            if name == "after" and "before" in results:
                same = (
                    "yes"
                    if _comparable(results["after"]) == _comparable(results["before"])
                    else "NO"
                )
            print(f"{label:<44} {name:<24} {wall * 1e3:>9.2f} {cpu * 1e3:>8.2f}  {same}")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    after.close()
    if before:
        before.close()
    plain.close()
    return 0


def _comparable(result: Any) -> Any:
    """Costs rounded (a kept cost may differ from SUM's in its last bits)."""
    if isinstance(result, list) and result and isinstance(result[0], dict):
        return [
            {k: round(v, 9) if isinstance(v, float) else v for k, v in row.items()}
            for row in result
        ]
    return result


if __name__ == "__main__":
    sys.exit(main())
