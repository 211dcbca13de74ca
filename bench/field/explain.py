"""``python -m bench.field.explain [--small] [NAME ...]``: where a slow row's time goes.

For each named search class (bench.field.queries keys) or listing call
(``list_middle``, ``list_last``, ``list_telegram_last``, ``token_usage``,
``top_tokens``, ``message_count``, ``title``, ``next_title``) on the field
corpus: the SQL statements ``SessionDB`` sends to SQLite for one call (caught
with sqlite3's trace callback, values inlined), each statement's ``EXPLAIN
QUERY PLAN`` and its time run alone on a plain connection, and a cProfile
of the call by cumulative time. The facts for the phase that fixes a row:
whether the time is in SQLite (and in which statement and plan) or in
Python, measured rather than guessed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .corpus import FULL, SMALL, ensure
from .queries import CLASSES, FILTERS
from .search import listing_targets

_SKIP = ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SAVEPOINT", "RELEASE", "--")


@contextmanager
def traced(statements: list[str]) -> Iterator[None]:
    """Every connection sqlite3 opens inside the block reports its statements to the list."""
    connect = sqlite3.connect

    def tracing_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(statements.append)
        return connection

    # SQLAlchemy's pysqlite dialect connects through sqlite3.dbapi2, its own name for it.
    modules = (sqlite3, sqlite3.dbapi2)
    for module in modules:
        module.connect = tracing_connect  # type: ignore[assignment]
    try:
        yield
    finally:
        for module in modules:
            module.connect = connect  # type: ignore[assignment]


def calls(db: Any, corpus: Path) -> dict[str, Callable[[], Any]]:
    named: dict[str, Callable[[], Any]] = {}
    for query_class in CLASSES:
        for variant, filters in FILTERS.items():
            suffix = "" if variant == "-" else "+filters"
            named[query_class.key + suffix] = lambda q=query_class.query, f=filters: (
                db.search_messages(q, **f)
            )
    t = listing_targets(corpus)
    named.update(
        list_middle=lambda: db.list_sessions_rich(limit=20, offset=t["roots"] // 2),
        list_last=lambda: db.list_sessions_rich(limit=20, offset=max(0, t["roots"] - 20)),
        list_telegram_last=lambda: db.list_sessions_rich(
            source="telegram", limit=20, offset=max(0, t["telegram_roots"] - 20)
        ),
        token_usage=db.token_usage_by_model,
        top_tokens=lambda: db.top_sessions_by_tokens(10),
        message_count=db.message_count,
        title=lambda: db.resolve_session_by_title(t["lineage_base"]),
        next_title=lambda: db.get_next_title_in_lineage(t["lineage_base"]),
    )
    return named


def _alone(connection: sqlite3.Connection, sql: str) -> tuple[float, int, list[str]]:
    """Median seconds of 3 runs of ``sql`` by itself, its row count, and its query plan."""
    plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
    times, rows = [], 0
    for _ in range(3):
        started = time.perf_counter()
        rows = len(connection.execute(sql).fetchall())
        times.append(time.perf_counter() - started)
    return statistics.median(times), rows, plan


def explain(name: str, call: Callable[[], Any], statements: list[str], corpus: Path) -> str:
    out = io.StringIO()
    call()  # warm: statement caches and the pages of the file
    statements.clear()
    started = time.perf_counter()
    call()
    elapsed = time.perf_counter() - started
    sent = [s for s in statements if not s.lstrip().upper().startswith(_SKIP)]
    print(f"\n=== {name}: {elapsed * 1e3:.1f} ms for the call, {len(sent)} statements", file=out)
    plain = sqlite3.connect(f"file:{corpus}?mode=ro", uri=True)
    try:
        seen: dict[str, int] = {}
        for sql in sent:
            shape = " ".join(sql.split())[:120]
            seen[shape] = seen.get(shape, 0) + 1
            if seen[shape] > 1:
                continue
            print("    " + " ".join(sql.split())[:600], file=out)
            try:
                seconds, rows, plan = _alone(plain, sql)
            except sqlite3.Error as error:  # e.g. a statement the trace cut short
                print(f"--- not run alone: {error}", file=out)
                continue
            print(f"--- {seconds * 1e3:.2f} ms alone, {rows} rows", file=out)
            for step in plan:
                print(f"      plan: {step}", file=out)
        repeated = {shape: n for shape, n in seen.items() if n > 1}
        for shape, n in repeated.items():
            print(f"--- sent {n} times (shape): {shape[:100]}", file=out)
    finally:
        plain.close()
    profile = cProfile.Profile()
    profile.runcall(call)
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats(14)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.explain")
    parser.add_argument("names", nargs="*", help="class keys (+filters) or listing calls")
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args(argv)
    corpus, _facts = ensure(SMALL if args.small else FULL)
    statements: list[str] = []
    # Traced for the whole run: the store opens connections when it first needs them.
    with traced(statements):
        from hermes_store import SessionDB

        db = SessionDB(corpus)
        try:
            named = calls(db, corpus)
            unknown = [n for n in args.names if n not in named]
            if unknown:
                parser.error(f"unknown: {', '.join(unknown)}; known: {', '.join(named)}")
            for name in args.names or list(named):
                print(explain(name, named[name], statements, corpus), flush=True)
        finally:
            db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
