"""``python -m bench.field.agent_count [--corpus PATH]``: counts on the agent's files.

Issue #32 asks that ``message_count()`` on the agent's own files stay within
1.5x of the agent's store, measured at field size, where the count itself
is the work and a unit of work's fixed cost is not. The field corpus
(:mod:`bench.field.corpus`, our head layout) is poured into an empty file of
the agent's layout v10 and v25 (:func:`bench.micro.agent_layouts.agent_template`)
with plain SQL -- ``ATTACH`` and ``INSERT ... SELECT`` of the columns both
have, with the agent's message triggers dropped during the fill and put back
from their own stored SQL after it. The agent's full-text indexes are
therefore left empty: a bare ``COUNT(*)`` of ``messages`` and the store's
count never read them, and filling them trigger by trigger would take hours.
At v25 one message in ten is inactive (rewound), as in the small rows.

Each side then counts on its own copy of the filled file, interleaved: the
store's ``SessionDB.message_count()`` against the agent's ``SELECT COUNT(*)
FROM messages`` on one open connection (:class:`bench.micro.agent_plain.AgentPlainDB`).
The table prints medians, 95th percentiles, the CPU ratio and the load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.field.corpus import WORK
from bench.micro.agent_layouts import agent_template, settle
from bench.micro.agent_plain import AgentPlainDB
from bench.micro.corpus import fresh_copy
from hermes_store.backends.sqlite.library import driver as sqlite3

VERSIONS = (10, 25)


def _columns(connection: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    return [row[1] for row in connection.execute(f"PRAGMA {schema}.table_info({table})")]


def fill(corpus: Path, version: int, path: Path) -> Path:
    """An agent-layout file at ``version`` holding the corpus's sessions and messages."""
    if path.exists():
        return path
    partial = path.with_suffix(".partial.db")
    partial.unlink(missing_ok=True)
    shutil.copyfile(agent_template(path.parent, version), partial)
    connection = sqlite3.connect(partial, isolation_level=None)
    try:
        connection.execute("ATTACH ? AS corpus", (f"file:{corpus}?mode=ro",))
        triggers = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'"
        ).fetchall()
        connection.execute("BEGIN")
        for name, _sql in triggers:
            connection.execute(f'DROP TRIGGER "{name}"')
        for table in ("sessions", "messages"):
            theirs = set(_columns(connection, table, "corpus"))
            shared = [name for name in _columns(connection, table) if name in theirs]
            names = ", ".join(shared)
            connection.execute(
                f"INSERT INTO main.{table} ({names}) SELECT {names} FROM corpus.{table}"
            )
        if "active" in _columns(connection, "messages"):
            connection.execute("UPDATE messages SET active = 0 WHERE id % 10 = 0")
        for _name, sql in triggers:
            connection.execute(sql)
        connection.execute("COMMIT")
        connection.execute("DETACH corpus")
    finally:
        connection.close()
    settle(partial).rename(path)
    return path


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def measure(filled: Path, reps: int, calls: int) -> dict[str, float]:
    """Per-call wall and CPU of each side, ``reps`` interleaved rounds of ``calls`` counts."""
    from hermes_store import SessionDB

    scratch = filled.parent / f"count-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    try:
        ours = SessionDB(fresh_copy(filled, scratch / "store.db"))
        theirs = AgentPlainDB(fresh_copy(filled, scratch / "agent.db"))
        expected = theirs.message_count()
        if ours.message_count() != expected:
            raise RuntimeError(f"the counts differ: {ours.message_count()} against {expected}")
        wall: dict[str, list[float]] = {"store": [], "agent": []}
        cpu: dict[str, list[float]] = {"store": [], "agent": []}
        sides = (("store", ours.message_count), ("agent", theirs.message_count))
        for rep in range(reps):
            for name, count in sides if rep % 2 == 0 else sides[::-1]:
                for _ in range(calls):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    count()
                    wall[name].append(time.perf_counter() - started)
                    cpu[name].append(time.process_time() - started_cpu)
        ours.close()
        theirs.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {"messages": float(expected)}
    for name in ("store", "agent"):
        result[f"{name}_ms"] = statistics.median(wall[name]) * 1e3
        result[f"{name}_p95_ms"] = _p95(wall[name]) * 1e3
        result[f"{name}_cpu_ms"] = statistics.fmean(cpu[name]) * 1e3
    return result


def _default_corpus() -> Path | None:
    found = sorted(WORK.glob("field-*m-*s-*.db"), key=lambda p: p.stat().st_size)
    found = [path for path in found if not path.stem.endswith(".partial")]
    return found[-1] if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.agent_count")
    parser.add_argument("--corpus", type=Path, help="a field corpus file (default: the largest)")
    parser.add_argument("--reps", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=5, help="counts per side per round")
    args = parser.parse_args(argv)
    corpus = args.corpus or _default_corpus()
    if corpus is None or not corpus.exists():
        print("no field corpus: run 'python -m bench.field.corpus' first", file=sys.stderr)
        return 1
    WORK.mkdir(parents=True, exist_ok=True)
    print(
        f"{'file':<9} {'messages':>9} {'store ms':>9} {'agent ms':>9} {'ratio':>6} "
        f"{'p95 ratio':>9} {'CPU ratio':>9}  load"
    )
    for version in VERSIONS:
        filled = fill(corpus, version, WORK / f"agent-v{version}-{corpus.stem}.db")
        row = measure(filled, args.reps, args.calls)
        load = os.getloadavg()[0]
        print(
            f"agent v{version:<2} {int(row['messages']):>9,} {row['store_ms']:>9.2f} "
            f"{row['agent_ms']:>9.2f} {row['store_ms'] / row['agent_ms']:>6.2f} "
            f"{row['store_p95_ms'] / row['agent_p95_ms']:>9.2f} "
            f"{row['store_cpu_ms'] / row['agent_cpu_ms']:>9.2f}  {load:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
