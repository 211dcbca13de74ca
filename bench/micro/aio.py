"""``python -m bench.micro.aio [--appends N] [--reps R] [--only SECTION] [--json FILE]`` (``--aio``)

The rows of issue #20, each against its yardstick in the same run, on the
repository's disk (bench/.work/):

* **loop stall** -- the largest gap of a 1 ms ticker task while a write waits
  2 s for another process's write lock: SessionDB called on the loop (today),
  ``asyncio.to_thread`` around it, and AsyncSessionDB. Target <= 5 ms.
* **8 appenders** at ``durability="full"`` -- 8 threads on one SessionDB with
  shared commits, 8 asyncio tasks on one AsyncSessionDB, and (for the record)
  8 threads without shared commits, against plain ``sqlite3`` with 8 threads
  (the old class's shape: one connection, a lock, ``BEGIN IMMEDIATE``).
  Beside them the floor of the shape (``bench.micro.plain_group``): the same SQL
  grouped by the fewest Python steps, on plain ``sqlite3`` with 8 threads --
  what one process under one GIL can do at all, so that a miss can be told
  from our own layers' cost ("x floor").
  Each variant runs in a fresh process; appends per second, target >= 3x
  plain's. Then each once more under ``strace -f -c -e trace=fsync,fdatasync``
  (untimed): the flushes per append.
* **single writer** -- one thread appending, shared commits on against off
  (today's ``append_message``), interleaved: target <= 1.05x.
* **thread vs SQLAlchemy asyncio** -- the per-call cost of a read and of an
  append (durability normal, so the flush does not hide it) through
  AsyncSessionDB, and through ``create_async_engine("sqlite+aiosqlite://")``
  running the same repositories under ``run_sync`` (only if aiosqlite is
  installed; it is not a dependency).

No assertion anywhere: a MISS is a finding. Timings on a shared machine
move; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..paths import REPO_ROOT, WORK_ROOT

WORK = WORK_ROOT
HOLDER = REPO_ROOT / "tests" / "support" / "lock_holder.py"
WRITERS = 8
VARIANTS = ("plain", "plain-grouped", "threads", "tasks", "threads-unshared")
SECTIONS = ("stall", "appenders", "single", "aiosqlite")
_STRACE_ROW = r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?f(?:data)?sync"
"""A row of ``strace -c``'s table for fsync or fdatasync: its calls column."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _fresh_db(path: Path, sessions: int) -> None:
    from hermes_store import SessionDB

    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with SessionDB(path) as db:
        for n in range(sessions):
            db.create_session(f"w{n}", "bench")


# ----------------------------------------------------------------------
# 8 appenders (run in a child process: python -m bench.micro.aio --child VARIANT DB N)
# ----------------------------------------------------------------------
def child(variant: str, db_path: str, appends: int) -> dict[str, Any]:
    """Run one variant's 8 writers, ``appends`` each; wall and CPU time, commit counts."""
    return _child(variant, db_path, appends)


def _child(variant: str, db_path: str, appends: int) -> dict[str, Any]:
    if variant == "plain":
        from bench.micro.plain import PlainSessionDB

        plain = PlainSessionDB(db_path)
        elapsed, cpu = _eight_appending(
            lambda session, text: plain.append_message(session, "user", content=text), appends
        )
        plain.close()
        return {"seconds": elapsed, "cpu_s": cpu, "transactions": WRITERS * appends}
    if variant == "plain-grouped":
        from bench.micro.plain_group import GroupedPlainAppender

        grouped = GroupedPlainAppender(db_path)
        elapsed, cpu = _eight_appending(
            lambda session, text: grouped.append_message(session, "user", text), appends
        )
        grouped.close()
        return {"seconds": elapsed, "cpu_s": cpu, "transactions": grouped.transactions}
    if variant in ("threads", "threads-unshared"):
        from hermes_store import SessionDB

        db = SessionDB(db_path, shared_commits=variant == "threads")
        elapsed, cpu = _eight_appending(
            lambda session, text: db.append_message(session, "user", text), appends
        )
        shared = db.store.shared
        groups = shared.groups if shared is not None else WRITERS * appends
        db.close()
        return {"seconds": elapsed, "cpu_s": cpu, "transactions": groups}
    from hermes_store.aio import AsyncSessionDB

    async def run() -> dict[str, Any]:
        db = await AsyncSessionDB.open(db_path)
        await db.get_session("w0")  # the workers' first connection, outside the timing

        async def write(n: int) -> None:
            for k in range(appends):
                await db.append_message(f"w{n}", "user", f"message {k}")

        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(write(n) for n in range(WRITERS)))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert db.store.shared is not None
        groups = db.store.shared.groups
        await db.close()
        return {"seconds": elapsed, "cpu_s": cpu, "transactions": groups}

    return asyncio.run(run())


def _eight_appending(append: Callable[[str, str], object], appends: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the process while 8 threads, started together, each called
    ``append(session, text)`` ``appends`` times, thread ``n`` on session ``wn``."""
    go = threading.Barrier(WRITERS + 1)

    def write(n: int) -> None:
        go.wait()
        for k in range(appends):
            append(f"w{n}", f"message {k}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    go.wait()
    c0, t0 = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0, time.process_time() - c0


def _run_child(variant: str, db: Path, appends: int, strace: bool = False) -> dict[str, Any]:
    _fresh_db(db, WRITERS)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    args = [sys.executable, "-m", "bench.micro.aio", "--child", variant, str(db), str(appends)]
    if strace:
        out = db.with_suffix(".strace")
        args = ["strace", "-f", "-c", "-o", str(out), "-e", "trace=fsync,fdatasync", *args]
    done = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if strace:
        text = db.with_suffix(".strace").read_text()
        result["fsyncs"] = sum(int(m.group(1)) for m in re.finditer(_STRACE_ROW, text, re.M))
    return result


def appenders(work: Path, appends: int, reps: int) -> dict[str, Any]:
    db = work / "appenders.db"
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    transactions: dict[str, int] = {}
    for rep in range(reps):
        order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            result = _run_child(variant, db, appends)
            samples[variant].append(WRITERS * appends / result["seconds"])
            cpu[variant].append(result["cpu_s"] / (WRITERS * appends))
            transactions[variant] = result["transactions"]
            log(f"    {variant}: {samples[variant][-1]:.0f} appends/s")
    fsyncs: dict[str, float | None] = {}
    if shutil.which("strace"):
        for variant in VARIANTS:
            result = _run_child(variant, db, appends, strace=True)
            fsyncs[variant] = result.get("fsyncs", 0) / (WRITERS * appends)
    rate = {v: statistics.median(s) for v, s in samples.items()}
    return {
        "appends_per_s": rate,
        "samples": samples,
        "ratio_vs_plain": {v: rate[v] / rate["plain"] for v in VARIANTS},
        "ratio_vs_floor": {v: rate[v] / rate["plain-grouped"] for v in VARIANTS},
        "cpu_per_append_s": {v: statistics.median(c) for v, c in cpu.items()},
        "appends_per_transaction": {
            v: WRITERS * appends / max(1, t) for v, t in transactions.items()
        },
        "fsyncs_per_append": fsyncs,
    }


# ----------------------------------------------------------------------
# Loop stall while another process holds the write lock
# ----------------------------------------------------------------------
async def _stall(db_path: Path, how: str, hold_s: float) -> dict[str, Any]:
    from hermes_store import SessionDB
    from hermes_store.aio import AsyncSessionDB

    sync_db = SessionDB(db_path)
    async_db = AsyncSessionDB(db=SessionDB(db_path, shared_commits=True))
    await async_db.get_session("w0")
    holder = await asyncio.create_subprocess_exec(
        sys.executable, str(HOLDER), str(db_path), str(hold_s), stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    await holder.stdout.readline()
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    if how == "on the loop":
        sync_db.append_message("w0", "user", "waited")
    elif how == "asyncio.to_thread":
        await asyncio.to_thread(sync_db.append_message, "w0", "user", "waited")
    elif how == "AsyncSessionDB":
        await async_db.append_message("w0", "user", "waited")
    else:  # the machine's own noise: the loop sleeps while the lock is held
        await asyncio.sleep(hold_s)
    waited = time.perf_counter() - t0
    done.set()
    await ticking
    await holder.wait()
    sync_db.close()
    await async_db.close()
    ordered = sorted(gaps)
    return {
        "waited_s": waited,
        "max_gap_s": ordered[-1],
        "p99_gap_s": ordered[int(0.99 * (len(ordered) - 1))],
        "ticks": len(gaps),
    }


def stall(work: Path, reps: int, hold_s: float = 2.0) -> dict[str, Any]:
    db = work / "stall.db"
    _fresh_db(db, 1)
    rows: dict[str, list[dict[str, Any]]] = {}
    for how in ("idle (no write)", "on the loop", "asyncio.to_thread", "AsyncSessionDB"):
        rows[how] = [asyncio.run(_stall(db, how, hold_s)) for _ in range(reps)]
        log(f"    {how}: max gap " + ", ".join(f"{r['max_gap_s'] * 1e3:.1f} ms" for r in rows[how]))
    return rows


# ----------------------------------------------------------------------
# Single writer: shared commits on vs off, interleaved
# ----------------------------------------------------------------------
def single(work: Path, appends: int, reps: int) -> dict[str, Any]:
    """Two stores, one per mode, on two files of the same disk; appends alternate between them.

    Alternating call by call (the order flipped every round) puts both modes
    under the same load from the other programs on the machine; beside the
    wall time, the thread's CPU time, which leaves the fsync wait out.
    """
    from hermes_store import SessionDB

    dbs = {}
    for mode in ("off", "on"):
        path = work / f"single-{mode}.db"
        _fresh_db(path, 1)
        dbs[mode] = SessionDB(path, shared_commits=mode == "on")
        dbs[mode].append_message("w0", "user", "warm")
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for rep in range(reps):
        spent = {m: 0.0 for m in dbs}
        used = {m: 0.0 for m in dbs}
        order = ("off", "on") if rep % 2 == 0 else ("on", "off")
        for k in range(appends):
            for mode in order:
                c0, t0 = time.thread_time(), time.perf_counter()
                dbs[mode].append_message("w0", "user", f"message {k}")
                spent[mode] += time.perf_counter() - t0
                used[mode] += time.thread_time() - c0
        for mode in dbs:
            wall[mode].append(spent[mode] / appends)
            cpu[mode].append(used[mode] / appends)
    for db in dbs.values():
        db.close()
    med = {m: statistics.median(s) for m, s in wall.items()}
    paired = sorted(on / off for on, off in zip(wall["on"], wall["off"], strict=True))
    cpu_med = {m: statistics.median(s) for m, s in cpu.items()}
    return {
        "per_append_s": med,
        "ratio": med["on"] / med["off"],
        "paired_ratios": paired,
        "cpu_per_append_s": cpu_med,
        "cpu_ratio": cpu_med["on"] / cpu_med["off"],
    }


# ----------------------------------------------------------------------
# Our worker thread vs SQLAlchemy's asyncio extension with aiosqlite
# ----------------------------------------------------------------------
def versus_aiosqlite(work: Path, calls: int) -> dict[str, Any] | None:
    try:
        import aiosqlite  # noqa: F401
    except ImportError:
        return None
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from hermes_store.aio import AsyncSessionDB

    db_path = work / "versus.db"

    async def ours() -> tuple[float, float]:
        db = await AsyncSessionDB.open(db_path, durability="normal")
        await db.get_session("w0")
        t0 = time.perf_counter()
        for _ in range(calls):
            await db.get_session("w0")
        read = (time.perf_counter() - t0) / calls
        t0 = time.perf_counter()
        for k in range(calls):
            await db.append_message("w0", "user", f"m{k}")
        write = (time.perf_counter() - t0) / calls
        await db.close()
        return read, write

    async def theirs() -> tuple[float, float]:
        # Our repositories cannot run here at all: their prepared statements call the
        # sqlite3 driver directly, and aiosqlite's driver is asynchronous. So this is
        # a floor for that route: the same SQL as bare Core statements, no rules.
        engine = create_async_engine(f"sqlite+aiosqlite:///{db_path}")
        get = text("SELECT * FROM sessions WHERE id = :id")
        insert = text(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES (:s, 'user', :c, :t)"
        )
        bump = text("UPDATE sessions SET message_count = message_count + 1 WHERE id = :s")
        async with engine.connect() as conn:
            await conn.exec_driver_sql("PRAGMA synchronous = NORMAL")
            await conn.commit()
            t0 = time.perf_counter()
            for _ in range(calls):
                (await conn.execute(get, {"id": "w0"})).mappings().first()
                await conn.rollback()
            read = (time.perf_counter() - t0) / calls
            t0 = time.perf_counter()
            for k in range(calls):
                await conn.execute(insert, {"s": "w0", "c": f"m{k}", "t": time.time()})
                await conn.execute(bump, {"s": "w0"})
                await conn.commit()
            write = (time.perf_counter() - t0) / calls
        await engine.dispose()
        return read, write

    results: dict[str, list[tuple[float, float]]] = {"worker thread": [], "aiosqlite": []}
    for rep in range(2):
        for name in ("worker thread", "aiosqlite") if rep == 0 else ("aiosqlite", "worker thread"):
            _fresh_db(db_path, 1)
            results[name].append(asyncio.run(ours() if name == "worker thread" else theirs()))
    return {
        name: {"read_s": min(r for r, _ in runs), "append_s": min(w for _, w in runs)}
        for name, runs in results.items()
    }


# ----------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--child"]:
        variant, db_path, appends = args_in[1], args_in[2], int(args_in[3])
        print(json.dumps(child(variant, db_path, appends)))
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.aio", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--appends", type=int, default=100, help="appends per writer")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help="run only this section (repeatable); every section by default",
    )
    args = parser.parse_args(args_in)
    only = set(args.only or SECTIONS)
    work = WORK / f"aio-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"hermes_store asyncio/shared-commit benchmark; load average {load_average()}")
        stalls = eight = one = versus = None
        if "stall" in only:
            log("  loop stall ...")
            stalls = stall(work, max(2, args.reps - 1))
        if "appenders" in only:
            log("  8 appenders ...")
            eight = appenders(work, args.appends, args.reps)
        if "single" in only:
            log("  single writer ...")
            one = single(work, args.appends, max(6, args.reps * 2))
        if "aiosqlite" in only:
            log("  worker thread vs aiosqlite ...")
            versus = versus_aiosqlite(work, 300)
        report(stalls, eight, one, versus)
        if "aiosqlite" in only and versus is None:
            print("\n(aiosqlite not installed: the row against SQLAlchemy's asyncio is skipped)")
        print(f"load average at the end: {load_average()}")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {"stall": stalls, "appenders": eight, "single": one, "versus": versus},
                    indent=2,
                )
                + "\n"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(
    stalls: dict[str, Any] | None,
    eight: dict[str, Any] | None,
    one: dict[str, Any] | None,
    versus: dict[str, Any] | None,
) -> None:
    if stalls is not None:
        report_stalls(stalls)
    if eight is not None:
        report_appenders(eight)
    if one is not None:
        report_single(one)
    if versus is not None:
        report_versus(versus)


def report_stalls(stalls: dict[str, Any]) -> None:
    print(
        "\nLoop stall while another process holds the write lock 2 s (1 ms ticker; target <= 5 ms)"
    )
    print(
        f"{'how the write is called':<24} {'waited':>8} {'max gap':>16} {'p99 gap':>9} {'ticks':>6}"
    )
    for how, runs in stalls.items():
        gaps = " / ".join(f"{r['max_gap_s'] * 1e3:.1f}" for r in runs)
        p99 = max(r["p99_gap_s"] for r in runs) * 1e3
        verdict = ""
        if how == "AsyncSessionDB":
            verdict = "PASS" if max(r["max_gap_s"] for r in runs) <= 0.005 else "MISS"
        print(
            f"{how:<24} {runs[0]['waited_s']:>7.2f}s {gaps + ' ms':>16} {p99:>7.1f}ms "
            f"{runs[0]['ticks']:>6}  {verdict}"
        )


def report_appenders(eight: dict[str, Any]) -> None:
    print(f"\n{WRITERS} concurrent appenders, durability=full (target >= 3.0x plain)")
    print(
        f"{'variant':<34} {'appends/s':>10} {'x plain':>8} {'x floor':>8} {'appends/txn':>12} "
        f"{'fsyncs/append':>14} {'CPU/append':>11}"
    )
    names = {
        "plain": "plain sqlite3, 8 threads",
        "plain-grouped": "floor: plain sqlite3 grouped",
        "threads": "SessionDB shared, 8 threads",
        "tasks": "AsyncSessionDB, 8 tasks",
        "threads-unshared": "SessionDB unshared, 8 threads",
    }
    for variant in VARIANTS:
        ratio = eight["ratio_vs_plain"][variant]
        floor = eight["ratio_vs_floor"][variant]
        fsync = eight["fsyncs_per_append"].get(variant)
        verdict = ""
        if variant in ("threads", "tasks"):
            verdict = "PASS" if ratio >= 3.0 else "MISS"
        print(
            f"{names[variant]:<34} {eight['appends_per_s'][variant]:>10.0f} {ratio:>7.2f}x "
            f"{floor:>7.2f}x "
            f"{eight['appends_per_transaction'][variant]:>12.1f} "
            f"{'-' if fsync is None else f'{fsync:.2f}':>14} "
            f"{eight['cpu_per_append_s'][variant] * 1e6:>8.0f} us  {verdict}"
        )


def report_single(one: dict[str, Any]) -> None:
    print("\nSingle writer: shared commits on vs off (today's append_message), target <= 1.05x")
    per = one["per_append_s"]
    paired = one["paired_ratios"]
    print(
        f"off {per['off'] * 1e3:.3f} ms, on {per['on'] * 1e3:.3f} ms per append: "
        f"{one['ratio']:.3f}x (paired {paired[0]:.2f}-{paired[-1]:.2f}; CPU "
        f"{one['cpu_per_append_s']['off'] * 1e6:.0f} vs {one['cpu_per_append_s']['on'] * 1e6:.0f}"
        f" us, {one['cpu_ratio']:.3f}x)  " + ("PASS" if one["ratio"] <= 1.05 else "MISS")
    )


def report_versus(versus: dict[str, Any]) -> None:
    print("\nPer call, durability=normal: our worker thread vs SQLAlchemy asyncio + aiosqlite")
    for name, row in versus.items():
        print(
            f"{name:<14} read {row['read_s'] * 1e6:>7.0f} us   "
            f"append {row['append_s'] * 1e6:>7.0f} us"
        )


if __name__ == "__main__":
    sys.exit(main())
