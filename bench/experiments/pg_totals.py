"""``python -m bench.experiments.pg_totals --url URL [--writers 8 --appends 100]``

URL: ``postgresql+psycopg://.../db``.

Issue #28, item 3: what PostgreSQL's kept totals (revision 0017) cost and give.

* Reports: ``message_count()`` and ``token_usage_by_model()`` read from the
  kept stripes, interleaved with the exact aggregates they replace (the
  triggers disabled in between, so the store falls back), on the database
  of ``--url`` as it is (point it at a populated one). Medians and p95.
* Appends: ``--writers`` processes appending ``--appends`` messages each at
  once, with the triggers enabled and disabled, interleaved rounds: appends/s
  and the ratio, the load beside each row.

Leaves the triggers enabled and the totals refilled.

What it showed: PostgreSQL's kept totals make ``message_count()`` and
``token_usage_by_model()`` a read of a few stripes at a small cost per append.
Figures and the decision: docs/design/postgresql-move.md (revision 0017).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB
from hermes_store.backends.postgresql.totals import TRIGGERS, fill_totals

from ..stats import percentile

_WRITER = """
import sys
from hermes_store import SessionDB
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SessionDB(url) as db:
    db.create_session(name, "cli", model="bench")
    for k in range(n):
        db.append_message(name, "user", f"append {k} of {name}")
"""


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _triggers(url: URL, enabled: bool) -> None:
    engine = create_engine(url, poolclass=NullPool)
    verb = "ENABLE" if enabled else "DISABLE"
    try:
        with engine.begin() as connection:
            for name, ddl in TRIGGERS.items():
                table = "messages" if " ON messages " in ddl else "sessions"
                connection.execute(text(f"ALTER TABLE {table} {verb} TRIGGER {name}"))
    finally:
        engine.dispose()


def _time(call: Callable[[], Any], reps: int) -> list[float]:
    call()  # warm-up
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def _appends_per_s(url: str, writers: int, appends: int, tag: str) -> float:
    started = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, url, f"bench-{tag}-{k}", str(appends)])
        for k in range(writers)
    ]
    for proc in procs:
        proc.wait()
    return writers * appends / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.pg_totals", description=__doc__
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    url = make_url(args.url)
    plain = url.render_as_string(hide_password=False)
    with SessionDB(plain) as db:
        print(f"messages: {db.message_count():,}; load {_load()}")
        print("| report | kept median ms | kept p95 | counted median ms | counted p95 | load |")
        print("|---|---|---|---|---|---|")
        for label, call in (
            ("message_count()", db.message_count),
            ("token_usage_by_model()", db.token_usage_by_model),
        ):
            kept: list[float] = []
            counted: list[float] = []
            for _ in range(3):  # interleaved
                _triggers(url, True)
                kept += _time(call, args.reps)
                _triggers(url, False)
                counted += _time(call, args.reps)
            _triggers(url, True)
            print(
                f"| {label} | {1000 * statistics.median(kept):.2f} | "
                f"{1000 * percentile(kept, 95):.2f} | {1000 * statistics.median(counted):.2f} | "
                f"{1000 * percentile(counted, 95):.2f} | {_load()} |"
            )
    print(f"| appends, {args.writers} processes x {args.appends} | appends/s | load |")
    print("|---|---|---|")
    rates: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for enabled in (True, False):
            _triggers(url, enabled)
            load = _load()
            rate = _appends_per_s(plain, args.writers, args.appends, f"{round_}{int(enabled)}")
            rates[enabled].append(rate)
            label = "totals kept" if enabled else "triggers disabled"
            print(f"| {label} | {rate:,.0f} | {load} |", flush=True)
    _triggers(url, True)
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:  # the disabled rounds left the totals behind
            fill_totals(connection)
    finally:
        engine.dispose()
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"median appends/s: kept {on:,.0f}, without {off:,.0f}, ratio {on / off:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
