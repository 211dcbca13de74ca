"""``python -m bench.field.pg --url URL [--small | --corpus PATH]`` (= ``bench --field-pg``)

Issue #28's side-by-side rows: the same ``SessionDB`` calls on the field
corpus (bench.field.corpus) and on a PostgreSQL copy of it (made once with
``hermes-store copy --from CORPUS --to URL``; ``--copy`` does it here),
interleaved in one process, each call's first run an untimed warm-up.
Targets are the issue's: a search class within max(3x SQLite, 50 ms) at the
median and p95 <= 100 ms; a report within max(3x SQLite, 10 ms) at the
median. No assertion: a MISS is a finding, and ``--explain`` prints the
plans of PostgreSQL's statements for the classes that miss.

Hits are compared as sets of ids: PostgreSQL ranks with ``ts_rank``,
SQLite with bm25, so within a window the orders differ by design. Every
search class of bench.field.queries runs by default (``--classes`` picks
some), each unfiltered and with a gateway's filters; each row carries the
load average when it finished, since the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_store import SessionDB

from ..stats import percentile
from .corpus import FULL, SMALL, ensure
from .queries import CLASSES
from .search import agreement, listing_targets

SEARCH_FLOOR_S, SEARCH_P95_S, REPORT_FLOOR_S = 0.050, 0.100, 0.010
GATEWAY = {"source_filter": ["telegram", "discord"], "role_filter": ["user"]}
ALL_CLASSES = tuple(c.key for c in CLASSES)


@dataclass
class Pair:
    """One call on both backends: samples, and the verdict by the issue's rule."""

    label: str
    kind: str  # "search" or "report"
    sqlite_s: list[float] = field(default_factory=list)
    pg_s: list[float] = field(default_factory=list)
    agreement: str = ""
    load: str = ""

    def median(self, side: str) -> float:
        return statistics.median(self.sqlite_s if side == "sqlite" else self.pg_s)

    def p95(self, side: str) -> float:
        return percentile(self.sqlite_s if side == "sqlite" else self.pg_s, 95)

    @property
    def allowed_s(self) -> float:
        floor = SEARCH_FLOOR_S if self.kind == "search" else REPORT_FLOOR_S
        return max(3 * self.median("sqlite"), floor)

    @property
    def verdict(self) -> str:
        ok = self.median("pg") <= self.allowed_s
        if self.kind == "search":
            ok = ok and self.p95("pg") <= SEARCH_P95_S
        return "PASS" if ok else "MISS"


def measure(
    pair: Pair, sqlite_call: Callable[[], Any], pg_call: Callable[[], Any], reps: int
) -> Any:
    """Alternate the two sides ``reps`` times after one warm-up each; the last results."""
    sides = (("sqlite", sqlite_call), ("pg", pg_call))
    results: dict[str, Any] = {}
    for done in range(-1, reps):
        for name, call in sides if done % 2 == 0 else sides[::-1]:
            started = time.perf_counter()
            results[name] = call()
            elapsed = time.perf_counter() - started
            if done >= 0:
                (pair.sqlite_s if name == "sqlite" else pair.pg_s).append(elapsed)
    return results["sqlite"], results["pg"]


def search_pairs(
    lite: SessionDB, pg: SessionDB, keys: Sequence[str], reps: int, log: Callable[[str], None]
) -> list[Pair]:
    pairs = []
    for query_class in (c for c in CLASSES if c.key in keys):
        for variant, filters in (("", {}), (" [src+role]", GATEWAY)):
            pair = Pair(f"{query_class.label}{variant}: {query_class.query}", "search")
            q = query_class.query
            a, b = measure(
                pair,
                lambda q=q, f=filters: lite.search_messages(q, **f),  # type: ignore[misc]
                lambda q=q, f=filters: pg.search_messages(q, **f),  # type: ignore[misc]
                reps,
            )
            pair.agreement = agreement([h["id"] for h in b], [h["id"] for h in a])
            pair.load = load_average()
            log(f"    {pair.label}: pg median {pair.median('pg') * 1e3:.1f} ms")
            pairs.append(pair)
    return pairs


def report_pairs(lite: SessionDB, pg: SessionDB, base: str, reps: int) -> list[Pair]:
    calls: list[tuple[str, Callable[[SessionDB], Any]]] = [
        ("message_count()", lambda db: db.message_count()),
        ("token_usage_by_model()", lambda db: db.token_usage_by_model()),
        ("resolve_session_by_title(lineage)", lambda db: db.resolve_session_by_title(base)),
        ("get_next_title_in_lineage(lineage)", lambda db: db.get_next_title_in_lineage(base)),
    ]
    pairs = []
    for label, call in calls:
        pair = Pair(label, "report")
        a, b = measure(pair, lambda c=call: c(lite), lambda c=call: c(pg), reps)  # type: ignore[misc]
        pair.agreement = "same" if a == b else "differs"
        pair.load = load_average()
        pairs.append(pair)
    return pairs


def explain(pg: SessionDB, query: str, filters: dict[str, Any], slowest: float) -> str:
    """EXPLAIN ANALYZE of each statement one PostgreSQL search sends that takes ``slowest`` s+.

    The statements are caught as the driver gets them (SQLAlchemy's
    ``before_cursor_execute``) and run again, with the same parameters, under
    ``EXPLAIN (ANALYZE, BUFFERS)``.
    """
    from sqlalchemy import event

    sent: list[tuple[str, Any]] = []

    def catch(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    engine = pg.store.engine
    event.listen(engine, "before_cursor_execute", catch)
    try:
        pg.search_messages(query, **filters)
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    out = []
    with engine.connect() as connection:
        for statement, params in sent:
            if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            started = time.perf_counter()
            plan = connection.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, params)
            lines = [row[0] for row in plan]
            if time.perf_counter() - started >= slowest:
                out.append("\n".join([" ".join(statement.split())[:300], *lines]))
    return "\n\n".join(out)


def load_average() -> str:
    """The 1-minute load average now (the machine is shared: a row's context)."""
    return f"{os.getloadavg()[0]:.1f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def table(pairs: Sequence[Pair]) -> str:
    head = (
        f"| call | SQLite median | SQLite p95 | PostgreSQL median | PostgreSQL p95 | ratio "
        f"| allowed median | verdict | hits | load |\n|{'---|' * 10}"
    )
    lines = [head]
    for p in pairs:
        lines.append(
            f"| {p.label} | {ms(p.median('sqlite'))} | {ms(p.p95('sqlite'))} "
            f"| {ms(p.median('pg'))} | {ms(p.p95('pg'))} "
            f"| {p.median('pg') / p.median('sqlite'):.1f}x | {ms(p.allowed_s)} | {p.verdict} "
            f"| {p.agreement} | {p.load} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.pg", description=__doc__)
    parser.add_argument("--url", required=True, help="the PostgreSQL copy of the corpus")
    parser.add_argument("--small", action="store_true", help="the 100,000-message corpus")
    parser.add_argument(
        "--corpus", help="a field corpus file (bench.field.corpus) instead of --small/full"
    )
    parser.add_argument("--copy", action="store_true", help="copy the corpus into --url first")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--classes", default=",".join(ALL_CLASSES))
    parser.add_argument("--no-reports", action="store_true")
    parser.add_argument(
        "--explain", action="store_true", help="plans of PostgreSQL's statements for a MISS"
    )
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.corpus:
        path = Path(args.corpus)
    else:
        path, _facts = ensure(SMALL if args.small else FULL, log=log)
    if args.copy:
        from hermes_store.tools.copy import copy_store

        started = time.perf_counter()
        copy_store(str(path), args.url)
        log(f"  copied into {args.url} in {time.perf_counter() - started:.0f} s")
    with SessionDB(path) as lite, SessionDB(args.url) as pg:
        pairs = search_pairs(lite, pg, args.classes.split(","), args.reps, log)
        if not args.no_reports:
            pairs += report_pairs(lite, pg, listing_targets(path)["lineage_base"], args.reps)
        if args.explain:
            for pair in pairs:
                if pair.kind == "search" and pair.verdict == "MISS":
                    label, query = pair.label.split(": ", 1)
                    filters = GATEWAY if label.endswith("[src+role]") else {}
                    print(f"## {pair.label}\n{explain(pg, query, filters, 0.005)}\n")
    print(
        f"corpus {path.name}, {args.reps} reps each, PostgreSQL at {args.url}, "
        f"load {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end"
    )
    print(table(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
