"""``python -m bench.ops.fleet --url URL [--bouncer URL] [--clients 8,32,64] [--seconds S]``

A fleet on one PostgreSQL server: N client processes at once, each a
``SessionDB`` of its own with one session, appending a message and, every
fourth call, searching, for a fixed time. Straight to the server and, with
``--bouncer``, through PgBouncer in transaction pooling (the URL gets
``?pool_mode=transaction``); the two routes run one after the other for each
N on a fresh set of sessions, so their rows compare like for like.

Per row: appends per second over the whole fleet, append and search median
and p95 (ms), and errors (every exception a client saw, by type). No
assertion anywhere: errors are a finding, printed. The load average is
printed beside the rows, since the clients share the machine with the server.

``.ci/postgres.sh`` and ``.ci/pgbouncer.sh`` start a server and a PgBouncer
for it; ``createdb`` a database first and pass its URL (and PgBouncer's for
the same database).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from ..paths import REPO_ROOT

WORDS = ("deploy", "docker", "error", "kubernetes", "rollout", "cron", "timeout", "retry")

CLIENT = r"""
import json, sys, time, traceback
from collections import Counter
from hermes_store import SessionDB

url, session, seconds, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
words = sys.argv[5].split(",")
errors = Counter()
appends, searches = [], []
db = SessionDB(url)
try:
    db.create_session(session, "gateway")
except Exception as error:
    errors[type(error).__name__] += 1
while time.time() < start_at:
    time.sleep(0.005)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    word = words[n % len(words)]
    try:
        t = time.perf_counter()
        db.append_message(session, "user", f"{word} in run {n}: the {word} step of {session}")
        appends.append(time.perf_counter() - t)
        if n % 4 == 3:
            t = time.perf_counter()
            db.search_messages(word, limit=20)
            searches.append(time.perf_counter() - t)
    except Exception as error:
        errors[f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"] += 1
    n += 1
db.close()
print(json.dumps({"appends": appends, "searches": searches, "errors": dict(errors)}))
"""


def pooled(url: str) -> str:
    """``url`` with the option a transaction pooler needs."""
    return (
        make_url(url)
        .update_query_dict({"pool_mode": "transaction"})
        .render_as_string(hide_password=False)
    )


def run_fleet(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` processes on ``url`` for ``seconds``; their samples merged."""
    tag = uuid.uuid4().hex[:6]
    start_at = time.time() + 3.0 + clients * 0.05  # every client imported and connected
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLIENT,
                url,
                f"fleet-{tag}-{n}",
                str(seconds),
                str(start_at),
                ",".join(WORDS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(clients)
    ]
    appends: list[float] = []
    searches: list[float] = []
    errors: dict[str, int] = {}
    for process in processes:
        out, err = process.communicate(timeout=seconds + 300)
        if process.returncode != 0:
            key = f"client exited {process.returncode}: {err.strip().splitlines()[-1:]}"
            errors[key] = errors.get(key, 0) + 1
            continue
        report = json.loads(out)
        appends += report["appends"]
        searches += report["searches"]
        for name, count in report["errors"].items():
            errors[name] = errors.get(name, 0) + count
    return {"appends": appends, "searches": searches, "errors": errors, "seconds": seconds}


def _ms(samples: list[float], q: float) -> str:
    if not samples:
        return "-"
    ordered = sorted(samples)
    if q == 0.5:
        return f"{statistics.median(ordered) * 1000:.1f}"
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


def row(route: str, clients: int, result: dict[str, Any]) -> dict[str, Any]:
    errors = sum(result["errors"].values())
    return {
        "route": route,
        "clients": clients,
        "appends_per_s": round(len(result["appends"]) / result["seconds"]),
        "append_median_ms": _ms(result["appends"], 0.5),
        "append_p95_ms": _ms(result["appends"], 0.95),
        "search_median_ms": _ms(result["searches"], 0.5),
        "search_p95_ms": _ms(result["searches"], 0.95),
        "errors": errors,
        "error_kinds": result["errors"],
        "load": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ops.fleet", description=__doc__)
    parser.add_argument("--url", required=True, help="the database, straight on the server")
    parser.add_argument("--bouncer", help="the same database through PgBouncer")
    parser.add_argument("--clients", default="8,32,64")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    routes = [("direct", args.url)]
    if args.bouncer:
        routes.append(("pgbouncer", pooled(args.bouncer)))
    rows = []
    header = (
        f"{'route':10} {'clients':>7} {'appends/s':>10} {'append p50':>11} {'p95':>8} "
        f"{'search p50':>11} {'p95':>8} {'errors':>7} {'load':>5}"
    )
    print(header)
    print("-" * len(header))
    for clients in (int(n) for n in args.clients.split(",")):
        for route, url in routes:
            result = row(route, clients, run_fleet(url, clients, args.seconds))
            rows.append(result)
            print(
                f"{route:10} {clients:>7} {result['appends_per_s']:>10} "
                f"{result['append_median_ms']:>11} {result['append_p95_ms']:>8} "
                f"{result['search_median_ms']:>11} {result['search_p95_ms']:>8} "
                f"{result['errors']:>7} {result['load']:>5}",
                flush=True,
            )
            for kind, count in result["error_kinds"].items():
                print(f"    {count} x {kind}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
