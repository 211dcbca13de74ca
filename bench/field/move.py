"""``python -m bench.field.move --url postgresql+psycopg://.../anything [--small]``

Issue #28, item 4: moving the field corpus into PostgreSQL. Each round copies
the corpus twice into brand-new databases on the server of ``--url``,
interleaved:

* ``store``: :func:`hermes_store.tools.copy.copy_store`, the command's code
  (clash checks, batches of 20,000, COPY, index rebuild, ANALYZE, verification);
* ``bare``: the yardstick -- the same rows, already in memory, sent as one
  ``COPY`` per table into the same schema (same table, same stored tsvector,
  same b-trees, the GIN indexes dropped and built after, ANALYZE): what the
  server must do for these rows, with no reading, checking or batching.

For each: wall time, message rows per second, and CPU per message row on the
client (this process) and on the server (the postmaster and its children:
backends, parallel workers, exited ones through ``cutime``), with the load
average beside the row. The server CPU per row is the floor on this machine:
rows/s cannot exceed cores / server CPU per row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from hermes_store import Store
from hermes_store.backends.postgresql.bulk import analyze, build_search_indexes, drop_search_indexes
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.copy import copy_store

from .corpus import FULL, SMALL, ensure

_TICK = os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _server_cpu_s(postmaster: int) -> float:
    """CPU seconds of the postmaster, its live children and its reaped ones."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _postmaster(url: URL) -> int:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            backend = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
    finally:
        engine.dispose()
    return int((Path("/proc") / str(backend) / "stat").read_text().rsplit(")", 1)[1].split()[1])


def _fresh(server: URL, name: str) -> URL:
    admin = create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    url = server.set(database=name)
    Store(url).close()  # the schema at head
    return url


Rows = tuple[list[str], list[tuple[Any, ...]], list[str], list[tuple[Any, ...]]]
"""Session columns and rows, message columns and rows."""


def _rows(corpus: Path) -> Rows:
    """Both tables' rows as stored, read once (the yardstick sends them from memory)."""
    with Store(corpus, read_only=True) as store, store.read() as uow:
        s_cols = list(uow.layout.session_columns)
        m_cols = [c for c in uow.layout.message_columns if c != "active"]
    raw = sqlite3.connect(f"file:{corpus}?mode=ro", uri=True)
    try:
        sessions = raw.execute(f"SELECT {', '.join(s_cols)} FROM sessions ORDER BY id").fetchall()
        messages = raw.execute(f"SELECT {', '.join(m_cols)} FROM messages ORDER BY id").fetchall()
    finally:
        raw.close()
    return s_cols, sessions, m_cols, messages


PHASES: dict[str, float] = {}
"""The yardstick's last run: seconds of its COPY and of its index builds and ANALYZE."""


def _bare(url: URL, data: Rows) -> None:
    s_cols, sessions, m_cols, messages = data
    engine = create_engine(url, poolclass=NullPool)
    started = time.perf_counter()
    try:
        with engine.begin() as connection:
            drop_search_indexes(connection)
            driver = connection.connection.driver_connection
            assert driver is not None
            with driver.cursor() as cursor:
                # Parents after their children would break the foreign key: load them unlinked.
                parent = s_cols.index("parent_session_id")
                with cursor.copy(f"COPY sessions ({', '.join(s_cols)}) FROM STDIN") as copy:
                    for row in sessions:
                        copy.write_row([None if i == parent else v for i, v in enumerate(row)])
                with cursor.copy(f"COPY messages ({', '.join(m_cols)}) FROM STDIN") as copy:
                    for row in messages:
                        copy.write_row(row)
        PHASES["copy"] = time.perf_counter() - started
        build_search_indexes(engine)
        with engine.begin() as connection:
            analyze(connection)
        PHASES["indexes"] = time.perf_counter() - started - PHASES["copy"]
    finally:
        engine.dispose()


def _timed(run: Callable[[], None], postmaster: int) -> tuple[float, float, float]:
    cpu0, server0, wall0 = time.process_time(), _server_cpu_s(postmaster), time.perf_counter()
    run()
    wall = time.perf_counter() - wall0
    return wall, time.process_time() - cpu0, _server_cpu_s(postmaster) - server0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.move", description=__doc__)
    parser.add_argument("--url", required=True, help="a server URL (databases are made on it)")
    parser.add_argument("--small", action="store_true", help="the 100,000-message corpus")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    corpus, facts = ensure(SMALL if args.small else FULL)
    server = make_url(args.url)
    data = _rows(corpus)
    n_messages = len(data[3])
    postmaster = _postmaster(server.set(database="postgres"))
    print(f"corpus {corpus.name}: {len(data[1]):,} sessions, {n_messages:,} messages")
    print("| copy | wall s | messages/s | client CPU us/row | server CPU us/row | load |")
    print("|---|---|---|---|---|---|")
    results: dict[str, list[tuple[float, float, float]]] = {"store": [], "bare": []}
    for _ in range(args.rounds):
        for name in ("bare", "store"):
            target = _fresh(server, f"move_{name}")

            def run(t: URL = target, bare: bool = name == "bare") -> None:
                if bare:
                    _bare(t, data)
                else:
                    copy_store(corpus, t)

            load = _load()
            wall, client, srv = _timed(run, postmaster)
            results[name].append((wall, client, srv))
            if name == "bare":
                name = f"bare (COPY {PHASES['copy']:.1f} s + indexes {PHASES['indexes']:.1f} s)"
            print(
                f"| {name} | {wall:.1f} | {n_messages / wall:,.0f} | "
                f"{1e6 * client / n_messages:.0f} | {1e6 * srv / n_messages:.0f} | {load} |",
                flush=True,
            )
    store_wall = statistics.median(r[0] for r in results["store"])
    bare_wall = statistics.median(r[0] for r in results["bare"])
    bare_server = statistics.median(r[2] for r in results["bare"]) / n_messages
    cores = os.cpu_count() or 1
    print(
        f"median: store {n_messages / store_wall:,.0f} rows/s, bare COPY "
        f"{n_messages / bare_wall:,.0f} rows/s, ratio {store_wall / bare_wall:.2f}x; "
        f"server floor {cores} cores / {1e6 * bare_server:.0f} us = "
        f"{cores / bare_server:,.0f} rows/s; load now {_load()}"
    )
    del facts
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
