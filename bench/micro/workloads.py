"""The workloads: what is timed, on which file, and the target for store/plain.

Each workload has an untimed ``setup`` (a fresh copy of the template, or the
shared read-only corpus, an open database), a timed ``run`` that returns the
seconds its ``ops`` operations took, and a ``teardown`` that checks the result
and cleans up. The runner alternates the two implementations repetition by
repetition (plain/store, then store/plain, ...) on the same disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .corpus import (
    SEARCH_QUERIES,
    CorpusSpec,
    build_corpus,
    corpus_facts,
    fresh_copy,
    make_old_schema_template,
    make_template,
    sample_turns,
)
from .impls import Impl


@dataclass(frozen=True)
class Sizes:
    append_n: int
    append_reps: int
    turn_n: int
    turn_reps: int
    long_session: int
    get_reps: int
    corpus_messages: int
    search_reps: int
    open_batch: int
    open_reps: int
    writers: int
    writer_appends: int
    writer_reps: int
    export_reps: int


DEFAULT = Sizes(
    append_n=200,
    append_reps=7,
    turn_n=50,
    turn_reps=7,
    long_session=10_000,
    get_reps=15,
    corpus_messages=100_000,
    search_reps=11,
    open_batch=4,
    open_reps=25,
    writers=6,
    writer_appends=500,
    writer_reps=5,
    export_reps=5,
)
QUICK = Sizes(
    append_n=40,
    append_reps=3,
    turn_n=10,
    turn_reps=3,
    long_session=1_000,
    get_reps=5,
    corpus_messages=10_000,
    search_reps=3,
    open_batch=2,
    open_reps=5,
    writers=6,
    writer_appends=60,
    writer_reps=1,
    export_reps=2,
)


@dataclass
class Context:
    """What every workload may use; files live under ``work`` (same disk as the repo)."""

    work: Path
    template: Path
    corpus: Path
    spec: CorpusSpec
    sizes: Sizes
    repo_root: Path
    turns: list[list[dict[str, Any]]] = field(default_factory=list)
    template_v6: Path | None = None
    counter: int = 0

    def fresh(self, label: str, template: Path | None = None) -> Path:
        """A new byte-identical copy of the empty template."""
        self.counter += 1
        return fresh_copy(template or self.template, self.work / f"{label}-{self.counter}.db")


@dataclass
class Workload:
    key: str
    title: str
    target: float | None  # None: an informational row, no verdict
    size: str
    ops: int
    reps: int
    setup: Callable[[Impl, Context], dict[str, Any]]
    run: Callable[[dict[str, Any]], float]
    teardown: Callable[[dict[str, Any]], dict[str, Any]]
    warmup: int = 1
    op_label: str = "op"
    needs_zero_errors: bool = False
    contender: str = "store"
    """The implementation in the "store" column: a floor row puts another baseline there."""
    in_process: bool = True
    """False when child processes do the work: this process's CPU time then says nothing."""
    baseline: str = "plain"
    """The implementation in the "plain" column (the agent-file rows put the agent's replica)."""


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


WARM = 1
"""Messages each write workload appends, untimed, before timing (to session s0)."""


def _warm_writer(impl: Impl, db: Any) -> None:
    """One untimed append on the open database: statement caches warm, like a running agent."""
    db.create_session("s0", "cli")
    db.append_message("s0", "user", content="warm up")


def _session_counts(path: Path, session_id: str | None = None) -> tuple[int, int]:
    """Rows in ``messages`` and what the counters say: of the file, or of one session."""
    connection = sqlite3.connect(path)
    try:
        if session_id is not None:
            messages = connection.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            counted = connection.execute(
                "SELECT COALESCE(message_count, 0) FROM sessions WHERE id = ?", (session_id,)
            )
            return messages, counted.fetchone()[0]
        messages = connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        counted = connection.execute("SELECT COALESCE(SUM(message_count), 0) FROM sessions")
        return messages, counted.fetchone()[0]
    finally:
        connection.close()


# ----------------------------------------------------------------------
# append_message: one message per commit
# ----------------------------------------------------------------------
def append_message(ctx: Context) -> Workload:
    return _append_message(ctx, "append_message", "append_message, 1 msg/commit, on disk", 1.2)


def append_message_old_schema(ctx: Context) -> Workload:
    """Info: plain on the old store's own v6 file (no trigram index) vs the store on head."""
    return _append_message(
        ctx, "append_v6ref", "  same, plain on a v6 file (info)", None, old_schema=True
    )


# The info rows of the store with durability="normal": title, no target, contender.
_DURABILITY_NORMAL = ("  same, store durability=normal (info)", None, "store_normal")


def append_message_normal(ctx: Context) -> Workload:
    """Info: the store with ``durability="normal"`` (no flush per commit) vs plain."""
    return _append_message(ctx, "append_normal", *_DURABILITY_NORMAL)


def _append_message(
    ctx: Context,
    key: str,
    title: str,
    target: float | None,
    contender: str = "store",
    old_schema: bool = False,
) -> Workload:
    n = ctx.sizes.append_n
    flat = [m for turn in ctx.turns for m in turn]

    def template_for(impl: Impl) -> Path:
        return ctx.template_v6 if old_schema and impl.name == "plain" else ctx.template

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        path = ctx.fresh(f"append-{impl.name}", template_for(impl))
        db = impl.open(path)
        _warm_writer(impl, db)
        db.create_session("s1", "cli", model="anthropic/claude-sonnet-4.6")
        return {"db": db, "path": path}

    def run(state: dict[str, Any]) -> float:
        db = state["db"]
        append = db.append_message
        started = time.perf_counter()
        for index in range(n):
            append("s1", **flat[index % len(flat)])
        return time.perf_counter() - started

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        counts = _session_counts(state["path"])
        _remove_db(state["path"])
        return {"errors": 0 if counts == (n + WARM, n + WARM) else 1}

    return Workload(
        key,
        title,
        target,
        f"{n} appends/rep",
        n,
        ctx.sizes.append_reps,
        setup,
        run,
        teardown,
        op_label="append",
        contender=contender,
    )


# ----------------------------------------------------------------------
# a 6-message turn: one unit of work (store) vs 6 commits (plain)
# ----------------------------------------------------------------------
def append_turn(ctx: Context) -> Workload:
    return _append_turn(ctx, "append_turn", "6-msg turn: 1 UoW vs 6 plain commits", 0.4)


def append_turn_floor(ctx: Context) -> Workload:
    """Info: the store's SQL for a turn run on plain sqlite3, against 6 commits.

    The lowest ratio the turn row can reach on this file and disk: one
    transaction with the counter UPDATE and one multi-row INSERT, and no Python
    layers around them. What is left is SQLite's per-row work (the two FTS5
    indexes' triggers), which no layer above SQLite removes.
    """
    return _append_turn(
        ctx, "turn_floor", "  floor: store's SQL on plain sqlite3 (info)", None, "plain_tx"
    )


def append_turn_normal(ctx: Context) -> Workload:
    """Info: a turn on the store with ``durability="normal"`` vs 6 plain commits."""
    return _append_turn(ctx, "turn_normal", *_DURABILITY_NORMAL)


def _append_turn(
    ctx: Context, key: str, title: str, target: float | None, contender: str = "store"
) -> Workload:
    n = ctx.sizes.turn_n

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        path = ctx.fresh(f"turn-{impl.name}")
        db = impl.open(path)
        _warm_writer(impl, db)
        impl.append_turn(db, "s0", ctx.turns[-1])  # untimed: compiles the turn's statements
        db.create_session("s1", "cli", model="anthropic/claude-sonnet-4.6")
        return {"db": db, "path": path, "impl": impl}

    def run(state: dict[str, Any]) -> float:
        db, impl = state["db"], state["impl"]
        turns = ctx.turns
        started = time.perf_counter()
        for index in range(n):
            impl.append_turn(db, "s1", turns[index % len(turns)])
        return time.perf_counter() - started

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        counts = _session_counts(state["path"])
        _remove_db(state["path"])
        total = 6 * n + WARM + 6
        return {"errors": 0 if counts == (total, total) else 1}

    return Workload(
        key,
        title,
        target,
        f"{n} turns/rep",
        n,
        ctx.sizes.turn_reps,
        setup,
        run,
        teardown,
        op_label="turn",
        contender=contender,
    )


# ----------------------------------------------------------------------
# reads on the shared corpus (read-only: both query the identical file)
# ----------------------------------------------------------------------
def _open_corpus(impl: Impl, ctx: Context) -> dict[str, Any]:
    """Open the shared corpus and run each read once, untimed, on other data.

    A running agent reads through a warm connection: its statements are
    prepared (plain) or compiled and cached (store). The cold path is the
    ``open`` and ``cold_start`` rows.
    """
    db = impl.open(ctx.corpus)
    other = ctx.spec.session_ids[1]
    db.get_session(other)
    db.get_messages(other)
    db.search_messages("vacuum snapshot")
    return {"db": db}


def get_messages(ctx: Context) -> Workload:
    session_id = ctx.spec.long_session_id
    expected = ctx.sizes.long_session

    def run(state: dict[str, Any]) -> float:
        started = time.perf_counter()
        rows = state["db"].get_messages(session_id)
        elapsed = time.perf_counter() - started
        state["rows"] = len(rows)
        return elapsed

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        return {"errors": 0 if state.get("rows") == expected else 1}

    return Workload(
        "get_messages",
        "get_messages, one long session",
        1.2,
        f"{expected:,} msgs in a {ctx.sizes.corpus_messages:,}-msg file",
        1,
        ctx.sizes.get_reps,
        _open_corpus,
        run,
        teardown,
        op_label="call",
    )


def search_messages(ctx: Context) -> Workload:
    queries = SEARCH_QUERIES

    def run(state: dict[str, Any]) -> float:
        search = state["db"].search_messages
        started = time.perf_counter()
        hits = [len(search(query)) for query in queries]
        elapsed = time.perf_counter() - started
        state["hits"] = hits
        return elapsed

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        return {"errors": sum(1 for h in state.get("hits", []) if h != 20)}

    return Workload(
        "search_messages",
        "search_messages, 20 hits + context",
        1.1,
        f"{ctx.sizes.corpus_messages:,} msgs, {len(queries)} queries/rep",
        len(queries),
        ctx.sizes.search_reps,
        _open_corpus,
        run,
        teardown,
        op_label="query",
    )


def open_db(ctx: Context) -> Workload:
    batch = ctx.sizes.open_batch
    session_id = ctx.spec.long_session_id

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        return {"impl": impl}

    def run(state: dict[str, Any]) -> float:
        impl = state["impl"]
        started = time.perf_counter()
        for _ in range(batch):
            db = impl.open(ctx.corpus)
            db.get_session(session_id)
            db.close()
        return time.perf_counter() - started

    return Workload(
        "open",
        "open current db + 1 read + close",
        2.0,
        f"{ctx.sizes.corpus_messages:,}-msg file, {batch} opens/rep",
        batch,
        ctx.sizes.open_reps,
        setup,
        run,
        lambda state: {},
        op_label="open",
    )


_COLD = """
import os, sys, time
t0 = time.perf_counter()
from bench.micro.impls import IMPLS
db = IMPLS[sys.argv[1]].open(sys.argv[2])
db.get_session(sys.argv[3])
db.close()
print(time.perf_counter() - t0)
"""


def cold_start(ctx: Context) -> Workload:
    """Info: what a CLI invocation pays: a new interpreter, imports, open, one read."""
    session_id = ctx.spec.long_session_id

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        return {"impl": impl}

    def run(state: dict[str, Any]) -> float:
        args = [sys.executable, "-c", _COLD, state["impl"].name, str(ctx.corpus), session_id]
        started = time.perf_counter()
        subprocess.run(
            args, cwd=ctx.repo_root, env=_child_env(ctx), check=True, stdout=subprocess.DEVNULL
        )
        return time.perf_counter() - started

    return Workload(
        "cold_start",
        "  new process: import+open+read (info)",
        None,
        "python -c ..., wall time incl. interpreter",
        1,
        ctx.sizes.open_reps // 2 + 1,
        setup,
        run,
        lambda state: {},
        op_label="process",
        in_process=False,
    )


def _child_env(ctx: Context) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ctx.repo_root), env.get("PYTHONPATH")) if p)
    return env


def export_jsonl(ctx: Context) -> Workload:
    hashes: dict[str, str] = {}

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        state = _open_corpus(impl, ctx)
        for _session in state["db"].iter_export(source="no-such-source"):
            pass
        state["out"] = ctx.work / f"export-{impl.name}.jsonl"
        state["impl"] = impl
        return state

    def run(state: dict[str, Any]) -> float:
        db = state["db"]
        dumps = json.dumps
        started = time.perf_counter()
        with open(state["out"], "w", encoding="utf-8") as out:
            for session in db.iter_export():
                out.write(dumps(session) + "\n")
        return time.perf_counter() - started

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        digest = hashlib.sha256(state["out"].read_bytes()).hexdigest()
        state["out"].unlink()
        hashes.setdefault(state["impl"].name, digest)
        same = len(set(hashes.values())) == 1
        return {"errors": 0, "identical_output": same}

    return Workload(
        "export",
        "export to JSONL (iter_export)",
        1.2,
        f"{ctx.sizes.corpus_messages:,} msgs, {len(ctx.spec.session_ids):,} sessions",
        1,
        ctx.sizes.export_reps,
        setup,
        run,
        teardown,
        op_label="export",
    )


# ----------------------------------------------------------------------
# contention: real writer processes
# ----------------------------------------------------------------------
def concurrent_writers(ctx: Context) -> Workload:
    sizes = ctx.sizes
    title = f"{sizes.writers} writer procs x {sizes.writer_appends} appends"
    return _concurrent_writers(ctx, "writers", title, 1.0)


def concurrent_writers_normal(ctx: Context) -> Workload:
    """Info: the six writers on the store with ``durability="normal"`` vs plain."""
    return _concurrent_writers(ctx, "writers_normal", *_DURABILITY_NORMAL)


def _concurrent_writers(
    ctx: Context,
    key: str,
    title: str,
    target: float | None,
    contender: str = "store",
    *,
    template: Path | None = None,
    writers: int | None = None,
    baseline: str = "plain",
) -> Workload:
    writers = writers or ctx.sizes.writers
    appends = ctx.sizes.writer_appends

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        path = ctx.fresh(f"{key}-{impl.name}", template)
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executemany(
            "INSERT INTO sessions (id, source, started_at) VALUES (?, 'cli', ?)",
            [(f"w{i}", time.time()) for i in range(writers)],
        )
        connection.close()
        env = _child_env(ctx)
        procs = []
        for i in range(writers):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bench.micro.writer", impl.name, str(path), f"w{i}"]
                    + [str(appends), str(100 + i)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=ctx.repo_root,
                    env=env,
                )
            )
        for proc in procs:
            line = proc.stdout.readline().strip()  # type: ignore[union-attr]
            if line != "ready":
                raise RuntimeError(f"writer did not start: {line!r}")
        return {"procs": procs, "path": path}

    def run(state: dict[str, Any]) -> float:
        procs = state["procs"]
        for proc in procs:
            proc.stdin.write("go\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        reports = [json.loads(proc.stdout.readline()) for proc in procs]  # type: ignore[union-attr]
        state["reports"] = reports
        return max(r["t1"] for r in reports) - min(r["t0"] for r in reports)

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        for proc in state["procs"]:
            proc.stdin.close()
            proc.wait(timeout=60)
        reports = state.get("reports", [])
        errors = sum(r["errors"] for r in reports)
        counts = _session_counts(state["path"])
        total = writers * (appends + WARM)  # each writer warms up with one append
        if counts != (total, total):
            errors += 1
        _remove_db(state["path"])
        retries = [r["retries"] for r in reports if r["retries"] is not None]
        first = next((r["first_error"] for r in reports if r["first_error"]), None)
        return {"errors": errors, "retries": sum(retries) if retries else None, "first": first}

    return Workload(
        key,
        title,
        target,
        f"{writers}x{appends} = {writers * appends:,} commits, wall time",
        1,
        ctx.sizes.writer_reps,
        setup,
        run,
        teardown,
        warmup=0,
        op_label="run",
        needs_zero_errors=True,
        in_process=False,
        contender=contender,
        baseline=baseline,
    )


ALL = (
    append_message,
    append_message_old_schema,
    append_message_normal,
    append_turn,
    append_turn_floor,
    append_turn_normal,
    get_messages,
    search_messages,
    open_db,
    cold_start,
    concurrent_writers,
    concurrent_writers_normal,
    export_jsonl,
)


def prepare(sizes: Sizes, work: Path, repo_root: Path) -> tuple[Context, dict[str, Any]]:
    """The template, the corpus and the sample turns; returns the context and corpus facts."""
    template = make_template(work / "template.db")
    spec = CorpusSpec(
        total_messages=sizes.corpus_messages, long_session_messages=sizes.long_session
    )
    started = time.perf_counter()
    corpus = work / "corpus.db"
    build_corpus(template, corpus, spec)
    facts = corpus_facts(corpus)
    facts["build_s"] = round(time.perf_counter() - started, 1)
    ctx = Context(work, template, corpus, spec, sizes, repo_root, turns=sample_turns(40))
    ctx.template_v6 = make_old_schema_template(template, work / "template-v6.db")
    return ctx, facts


def by_key(ctx: Context) -> dict[str, Workload]:
    return {w.key: w for w in (factory(ctx) for factory in ALL)}


KEYS = (
    "append_message",
    "append_v6ref",
    "append_normal",
    "append_turn",
    "turn_floor",
    "turn_normal",
    "get_messages",
    "search_messages",
    "open",
    "cold_start",
    "writers",
    "writers_normal",
    "export",
)
