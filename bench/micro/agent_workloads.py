"""The rows of issue #32: appends and counts on the agent's files and on our head file.

* ``append_doc_trigram``: the store on our head file against plain ``sqlite3``
  on the document's schema with the trigram index -- what our later
  revisions' indexes and kept totals cost per append (target 1.1);
* ``agent_append_v10/v11/v25``: the store on a file of the agent's layout
  against the agent's own append replicated in plain ``sqlite3`` on a copy of
  the same file (:mod:`bench.micro.agent_plain`; target 1.0);
* ``agent_writers_v25``: eight writer processes on one v25 file, each side;
* ``agent_count_v10/v11/v25``: ``message_count()`` on a filled file of the
  agent's layout against the agent's bare ``SELECT COUNT(*)`` (target 1.5).

Same runner as every other row (:func:`bench.__main__.measure`): interleaved
repetitions, medians, the spread, wall and CPU ratios, the load beside it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .agent_layouts import AGENT_VERSIONS, agent_template, doc_trigram_template
from .agent_plain import insert_columns
from .corpus import fresh_copy
from .impls import Impl
from .workloads import Context, Workload, _concurrent_writers, _remove_db, _session_counts

COUNT_MESSAGES = {"default": 50_000, "quick": 3_000}
"""Messages in the file a count runs on; one in ten of v25's is inactive (rewound)."""
COUNT_CALLS = 20
AGENT_WRITERS = 8


def _append(
    ctx: Context,
    key: str,
    title: str,
    target: float,
    template_for: Callable[[Impl], Path],
    baseline: str,
) -> Workload:
    n = ctx.sizes.append_n
    flat = [m for turn in ctx.turns for m in turn]

    def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
        path = ctx.fresh(f"{key}-{impl.name}", template_for(impl))
        db = impl.open(path)
        db.create_session("s0", "cli")
        db.append_message("s0", "user", content="warm up")
        db.create_session("s1", "cli", model="anthropic/claude-sonnet-4.6")
        return {"db": db, "path": path}

    def run(state: dict[str, Any]) -> float:
        append = state["db"].append_message
        started = time.perf_counter()
        for index in range(n):
            append("s1", **flat[index % len(flat)])
        return time.perf_counter() - started

    def teardown(state: dict[str, Any]) -> dict[str, Any]:
        state["db"].close()
        counts = _session_counts(state["path"], "s1")
        _remove_db(state["path"])
        return {"errors": 0 if counts == (n, n) else 1}

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
        baseline=baseline,
    )


def append_doc_trigram(ctx: Context) -> Workload:
    doc = doc_trigram_template(ctx.work)
    return _append(
        ctx,
        "append_doc_trigram",
        "append on head file vs plain doc+trigram",
        1.1,
        lambda impl: doc if impl.name == "plain" else ctx.template,
        "plain",
    )


def _agent_append(version: int) -> Callable[[Context], Workload]:
    def factory(ctx: Context) -> Workload:
        template = agent_template(ctx.work, version)
        return _append(
            ctx,
            f"agent_append_v{version}",
            f"append on agent v{version} file vs agent's",
            1.0,
            lambda _impl: template,
            "agent",
        )

    return factory


def agent_writers_v25(ctx: Context) -> Workload:
    template = agent_template(ctx.work, 25)
    title = f"{AGENT_WRITERS} procs x {ctx.sizes.writer_appends} on agent v25"
    return _concurrent_writers(
        ctx,
        "agent_writers_v25",
        title,
        1.0,
        template=template,
        writers=AGENT_WRITERS,
        baseline="agent",
    )


def filled_agent_file(ctx: Context, version: int) -> Path:
    """An agent file of ``version`` holding :data:`COUNT_MESSAGES` messages, made once per run.

    Rows go in as the agent's INSERT writes them (its triggers fill its
    indexes); on v25 one row in ten is then marked inactive, as a rewind
    leaves it, so the count of all rows and of live rows differ.
    """
    path = ctx.work / f"agent-v{version}-filled.db"
    if path.exists():
        return path
    total = COUNT_MESSAGES["quick" if ctx.sizes.corpus_messages < 50_000 else "default"]
    fresh_copy(agent_template(ctx.work, version), path)
    columns = insert_columns(version)
    flat = [m for turn in ctx.turns for m in turn]
    rng = random.Random(32)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("BEGIN")
        sessions = [f"c{i}" for i in range(total // 50)]
        connection.executemany(
            "INSERT INTO sessions (id, source, started_at, message_count) VALUES (?, 'cli', ?, 50)",
            [(s, 1_760_000_000.0 + i) for i, s in enumerate(sessions)],
        )
        marks = ", ".join("?" * len(columns))
        sql = f"INSERT INTO messages ({', '.join(columns)}) VALUES ({marks})"
        rows = []
        for i in range(total):
            message = flat[i % len(flat)]
            values = {
                "session_id": sessions[i // 50],
                "role": message["role"],
                "content": message.get("content"),
                "tool_name": message.get("tool_name"),
                "tool_call_id": message.get("tool_call_id"),
                "timestamp": 1_760_000_000.0 + i,
                "observed": 0,
                "active": 0 if rng.random() < 0.1 else 1,
            }
            rows.append(tuple(values.get(name) for name in columns))
        connection.executemany(sql, rows)
        connection.execute("COMMIT")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return path


def _agent_count(version: int) -> Callable[[Context], Workload]:
    def factory(ctx: Context) -> Workload:
        expected: dict[str, int] = {}

        def setup(impl: Impl, ctx: Context) -> dict[str, Any]:
            db = impl.open(filled_agent_file(ctx, version))
            db.message_count()  # warm: statements prepared, pages cached
            return {"db": db, "impl": impl}

        def run(state: dict[str, Any]) -> float:
            count = state["db"].message_count
            started = time.perf_counter()
            for _ in range(COUNT_CALLS):
                state["n"] = count()
            return time.perf_counter() - started

        def teardown(state: dict[str, Any]) -> dict[str, Any]:
            state["db"].close()
            expected.setdefault("n", state["n"])
            return {"errors": 0 if state["n"] == expected["n"] else 1}

        return Workload(
            f"agent_count_v{version}",
            f"message_count() on agent v{version} file",
            1.5,
            "filled file, 20 calls/rep",
            COUNT_CALLS,
            ctx.sizes.search_reps,
            setup,
            run,
            teardown,
            op_label="call",
            baseline="agent",
        )

    return factory


ALL = (
    append_doc_trigram,
    *(_agent_append(v) for v in AGENT_VERSIONS),
    agent_writers_v25,
    *(_agent_count(v) for v in AGENT_VERSIONS),
)
KEYS = (
    "append_doc_trigram",
    *(f"agent_append_v{v}" for v in AGENT_VERSIONS),
    "agent_writers_v25",
    *(f"agent_count_v{v}" for v in AGENT_VERSIONS),
)


def by_key(ctx: Context, only: set[str] | None = None) -> dict[str, Workload]:
    """The rows, built only when asked for (their files take a moment to make)."""
    chosen = [(key, factory) for key, factory in zip(KEYS, ALL, strict=True)]
    return {key: factory(ctx) for key, factory in chosen if only is None or key in only}
