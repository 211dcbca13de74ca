"""``python -m bench.field.move --url postgresql+psycopg://.../anything [--small | --corpus FILE]``

Issue #28, item 4: moving the field corpus into PostgreSQL. Each round copies
the corpus into brand-new databases on the server of ``--url``, one run after
the other in the order of ``--runs`` (default ``bare,store``):

* ``store``: :func:`hermes_store.tools.copy.copy_store`, the command's code
  (clash checks, batches of 20,000, COPY, index rebuild, ANALYZE, verification);
* ``bare``: the yardstick -- the same rows, already in memory, sent as one
  ``COPY`` per table into the same schema (same table, same stored tsvector,
  same b-trees, the GIN indexes dropped and built after, ANALYZE): what the
  server must do for these rows, with no reading, checking or batching;
* ``raw``: the same rows by ``COPY`` into copies of the two tables with no
  trigger, no index and no constraint but ``NOT NULL``: the price of moving
  the bytes alone, below which no copy into any schema can go.

Each run is split into phases: ``rows`` (until the last row is in),
``indexes`` (the GIN builds after the load) and ``analyze``, with the load
average at every boundary, because a run of half an hour on a shared machine
sees the load change under it.

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
from hermes_store.tools import copy as copy_tool
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


class Phases:
    """Wall seconds of one run's phases, and the load when each began and ended."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.marks: list[tuple[str, float, str]] = [("start", self.started, _load())]

    def mark(self, phase_ended: str) -> None:
        """``phase_ended`` is over now (the next phase, if any, begins)."""
        self.marks.append((phase_ended, time.perf_counter(), _load()))

    def seconds(self) -> dict[str, float]:
        return {name: t - self.marks[i - 1][1] for i, (name, t, _) in enumerate(self.marks) if i}

    def loads(self) -> str:
        return " / ".join(load.split()[0] for _, _, load in self.marks)


def _store(corpus: Path, url: URL, phases: Phases) -> None:
    """The command's code; its progress marks the end of the rows, a probe times ANALYZE."""
    real_analyze = getattr(copy_tool, "analyze")  # noqa: B009

    def progress(phase: str, done: int, _total: int) -> None:
        if phase == "indexes" and done == 0:
            phases.mark("rows")

    def timed_analyze(connection: Any) -> None:
        phases.mark("indexes")
        real_analyze(connection)
        phases.mark("analyze")

    setattr(copy_tool, "analyze", timed_analyze)  # noqa: B010 (the module's own name is read at call)
    try:
        copy_store(corpus, url, progress=progress)
    finally:
        setattr(copy_tool, "analyze", real_analyze)  # noqa: B010


def _send(driver: Any, table: str, data: Rows) -> None:
    """One COPY per table; parents are loaded unlinked (a parent after its child breaks the key)."""
    s_cols, sessions, m_cols, messages = data
    with driver.cursor() as cursor:
        parent = s_cols.index("parent_session_id")
        with cursor.copy(f"COPY {table}sessions ({', '.join(s_cols)}) FROM STDIN") as copy:
            for row in sessions:
                copy.write_row([None if i == parent else v for i, v in enumerate(row)])
        with cursor.copy(f"COPY {table}messages ({', '.join(m_cols)}) FROM STDIN") as copy:
            for row in messages:
                copy.write_row(row)


def _bare(url: URL, data: Rows, phases: Phases) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            drop_search_indexes(connection)
            driver = connection.connection.driver_connection
            assert driver is not None
            _send(driver, "", data)
        phases.mark("rows")
        build_search_indexes(engine)
        phases.mark("indexes")
        with engine.begin() as connection:
            analyze(connection)
        phases.mark("analyze")
    finally:
        engine.dispose()


RAW_TABLES = (
    "CREATE TABLE raw_sessions (LIKE sessions INCLUDING DEFAULTS)",
    "CREATE TABLE raw_messages (LIKE messages INCLUDING DEFAULTS)",
)
"""Same columns and types; ``LIKE`` takes no index, trigger, key or check."""


def _raw(url: URL, data: Rows, phases: Phases) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            for ddl in RAW_TABLES:
                connection.exec_driver_sql(ddl)
        phases.marks[0] = ("start", time.perf_counter(), _load())
        with engine.begin() as connection:
            driver = connection.connection.driver_connection
            assert driver is not None
            _send(driver, "raw_", data)
        phases.mark("rows")
    finally:
        engine.dispose()


REAP_S = 2.0
"""Wait after a run before reading the server's CPU: a backend the run just closed is
counted only once the postmaster has reaped it (into its ``cutime``); read earlier, its
whole CPU is missed."""


def _timed(run: Callable[[], None], postmaster: int) -> tuple[float, float, float]:
    cpu0, server0, wall0 = time.process_time(), _server_cpu_s(postmaster), time.perf_counter()
    run()
    wall = time.perf_counter() - wall0
    client = time.process_time() - cpu0
    time.sleep(REAP_S)
    return wall, client, _server_cpu_s(postmaster) - server0


RUNS = ("store", "bare", "raw")


def _row(name: str, n_messages: int, wall: float, client: float, srv: float, ph: Phases) -> str:
    sec = ph.seconds()
    cells = [f"{sec[k]:.1f}" if k in sec else "-" for k in ("rows", "indexes", "analyze")]
    return (
        f"| {name} | {' | '.join(cells)} | {wall:.1f} | {n_messages / sec['rows']:,.0f} | "
        f"{n_messages / wall:,.0f} | {1e6 * client / n_messages:.0f} | "
        f"{1e6 * srv / n_messages:.0f} | {ph.loads()} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.move", description=__doc__)
    parser.add_argument("--url", required=True, help="a server URL (databases are made on it)")
    parser.add_argument("--small", action="store_true", help="the 100,000-message corpus")
    parser.add_argument("--corpus", type=Path, help="an existing field corpus file (read only)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--runs", default="bare,store", help=f"comma-separated, in order, of {', '.join(RUNS)}"
    )
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown or not runs:
        parser.error(f"--runs: unknown {', '.join(unknown) or 'empty list'}; known: {RUNS}")
    if args.corpus is not None:
        corpus = args.corpus
    else:
        corpus, _facts = ensure(SMALL if args.small else FULL)
    server = make_url(args.url)
    print(f"reading {corpus.name}; load {_load()}", flush=True)
    data = _rows(corpus)
    n_messages = len(data[3])
    postmaster = _postmaster(server.set(database="postgres"))
    print(f"corpus {corpus.name}: {len(data[1]):,} sessions, {n_messages:,} messages")
    print(
        "| run | rows s | indexes s | ANALYZE s | total s | rows/s (rows phase) | "
        "rows/s (total) | client CPU us/row | server CPU us/row | load (1 min) at each step |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    results: dict[str, list[float]] = {name: [] for name in runs}
    servers: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name in runs:
            target = _fresh(server, f"move_{name}")
            phases = Phases()

            def run(t: URL = target, kind: str = name, ph: Phases = phases) -> None:
                ph.marks[0] = ("start", time.perf_counter(), _load())
                if kind == "store":
                    _store(corpus, t, ph)
                elif kind == "bare":
                    _bare(t, data, ph)
                else:
                    _raw(t, data, ph)

            wall, client, srv = _timed(run, postmaster)
            wall = phases.marks[-1][1] - phases.marks[0][1] if name == "raw" else wall
            results[name].append(wall)
            servers[name].append(srv)
            print(_row(name, n_messages, wall, client, srv, phases), flush=True)
    cores = os.cpu_count() or 1
    medians = {name: statistics.median(walls) for name, walls in results.items()}
    summary = ", ".join(f"{name} {n_messages / w:,.0f} rows/s" for name, w in medians.items())
    print(f"median: {summary}; load now {_load()}")
    if "store" in medians and "bare" in medians:
        bare_server = statistics.median(servers["bare"]) / n_messages
        print(
            f"ratio store/bare {medians['store'] / medians['bare']:.2f}x; server floor "
            f"{cores} cores / {1e6 * bare_server:.0f} us = {cores / bare_server:,.0f} rows/s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
