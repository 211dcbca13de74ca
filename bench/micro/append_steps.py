"""``python -m bench.micro.append_steps [--calls N] [--root DIR]``

Instructions per append of each step the store takes that the agent's append does not.

:mod:`bench.micro.instructions` gives an append's whole cost; this splits it.
One process per file layout (our head file, the agent's v10 and v25) runs
under ``valgrind --tool=callgrind``; after a warm-up, each step runs ``N``
times in a loop of its own between two callgrind client requests (zero the
counters, dump them), on the store's own warm connection and, for the steps
that run inside an append's transaction, inside an open write transaction.
The loop and the client requests cost the same in every region, so the
empty loop's count is taken off each. A step measured this way costs what it
costs inside the append: instruction counts do not depend on what ran
before, only on the code and the data.

The client requests are two C functions built from valgrind's ``callgrind.h``
with the system's C compiler into ``bench/.work`` (ctypes calls them). The
module runs as a script too (``--root`` names the checkout whose
``hermes_store`` is measured), so the code before a change can be measured
from its own worktree with the same steps.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve()
_C_SOURCE = """
#include <valgrind/callgrind.h>
void meter_zero(void) { CALLGRIND_ZERO_STATS; }
void meter_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""
_MESSAGE: dict[str, Any] = {
    "role": "assistant",
    "content": "a reply of a few words, as most are",
    "token_count": 9,
}
FILES = ("head", "agent v10", "agent v25")


def build_meter(work: Path) -> Path:
    """The shared object whose two functions zero and dump callgrind's counters."""
    library = work / "meter.so"
    if not library.exists():
        source = work / "meter.c"
        source.write_text(_C_SOURCE)
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True
        )
    return library


class Meter:
    """Regions of a run under callgrind, each dumped under its name."""

    def __init__(self, library: Path, calls: int) -> None:
        lib = ctypes.CDLL(str(library))
        self._zero, self._dump = lib.meter_zero, lib.meter_dump
        self._dump.argtypes = [ctypes.c_char_p]
        self.calls = calls

    def region(self, name: str, step: Callable[[], object]) -> None:
        """``step()`` ``calls`` times, counted as region ``name``."""
        loop = range(self.calls)
        self._zero()
        for _ in loop:
            step()
        self._dump(name.encode())


def _file(work: Path, label: str) -> Path:
    from bench.micro.agent_layouts import agent_template
    from bench.micro.corpus import make_template

    if label == "head":
        return make_template(work / "template.db")
    return agent_template(work, int(label.removeprefix("agent v")))


def child(library: Path, path: Path, calls: int) -> None:
    """Every region on the file at ``path`` (see the module's docstring)."""
    from hermes_store import SessionDB
    from hermes_store.backends import backend_of
    from hermes_store.repositories.messages import MessageRepository
    from hermes_store.repositories.sessions import SessionRepository

    meter = Meter(library, calls)
    fields = dict.fromkeys(
        ("role", "content", "tool_name", "tool_calls", "tool_call_id", "token_count")
        + ("finish_reason", "reasoning", "reasoning_details", "codex_reasoning_items")
    )
    fields.update(_MESSAGE)
    db = SessionDB(path)
    db.create_session("s1", "cli")
    for _ in range(3):  # warm: every statement compiled, every module imported
        db.append_message("s1", **_MESSAGE)
    store = db._store  # noqa: SLF001 -- the bench reaches the parts it measures
    connections = store._connections  # noqa: SLF001
    with store.write() as uow:
        layout = uow.layout
        repository = uow.messages
    cell = store._layouts  # noqa: SLF001
    backend = connections.backend
    watch = connections._watch  # noqa: SLF001
    meter.region("empty loop", lambda: None)
    meter.region("append_message (whole)", lambda: db.append_message("s1", **_MESSAGE))
    meter.region("transact, empty work", lambda: store.transact(_nothing))
    meter.region("thread connection: acquire+release", lambda: _cycle(connections))

    connection, kept = connections.acquire()
    try:
        driver: Any = connection.connection.driver_connection
        rules = backend.driver_rules(connection)
        assert rules is not None
        meter.region("fork check: os.getpid()", lambda: os.getpid())
        if watch is not None:
            follow = watch.follow
            meter.region(
                "replaced-file check (stat)",
                lambda: follow(connection, connections.adopting, connections.on_replaced),
            )
        meter.region("Connection.info", lambda: connection.info)
        meter.region("backend.driver_rules(connection)", lambda: backend.driver_rules(connection))
        meter.region(
            "connection.connection.driver_connection",
            lambda: connection.connection.driver_connection,
        )
        meter.region("backend_of(connection)", lambda: backend_of(connection))

        def begin_commit() -> None:
            rules.begin(driver, write=True, patience_s=None)
            driver.execute("COMMIT")

        def plain_begin_commit() -> None:
            driver.execute("BEGIN IMMEDIATE")
            driver.execute("COMMIT")

        meter.region("BEGIN IMMEDIATE+COMMIT, driver alone", plain_begin_commit)
        meter.region("BEGIN IMMEDIATE through rules+COMMIT", begin_commit)
        driver.execute("BEGIN IMMEDIATE")
        try:
            if cell is not None:
                meter.region(
                    "schema-cookie read (current_layout)",
                    lambda: backend.current_layout(cell, connection, driver, write=True),
                )
            meter.region(
                "PRAGMA schema_version, driver alone",
                lambda: driver.execute("PRAGMA schema_version").fetchone(),
            )
            meter.region(
                "SessionRepository(...)",
                lambda: SessionRepository(connection, layout, time.time),
            )
            sessions = SessionRepository(connection, layout, time.time)
            meter.region(
                "MessageRepository(..., sessions)",
                lambda: MessageRepository(connection, layout, sessions, time.time),
            )
            from hermes_store.domain.messages import message_row
            from hermes_store.repositories import session_base

            bump = session_base._BUMP_COUNTERS  # noqa: SLF001
            params = {"p_id": "s1", "p_messages": 0, "p_tool_calls": 0}
            bump.rowcount(connection, params)
            form = bump._sqlite  # noqa: SLF001
            assert form is not None  # compiled by the call above
            values = form.values(params)
            meter.region(
                "counter UPDATE through Prepared", lambda: bump.rowcount(connection, params)
            )
            meter.region(
                "counter UPDATE, driver alone", lambda: driver.execute(form.sql, values).rowcount
            )
            meter.region("message_row (field checks)", lambda: message_row("s1", fields, 1.0))
            if layout.compression_locks:
                meter.region("guard: refuse_locked_sessions", lambda: repository._admit(("s1",)))  # noqa: SLF001
        finally:
            driver.execute("ROLLBACK")
    finally:
        connections.release(connection, kept)
    db.close()


def _nothing(_uow: Any) -> None:
    return None


def _cycle(connections: Any) -> None:
    """The thread's kept connection taken and given back, the file watch included."""
    connection, kept = connections.acquire()
    connections.release(connection, kept)


_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)
_NAME = re.compile(r"^desc: Trigger: Client Request: (.*)$", re.MULTILINE)


def regions(outputs: Iterator[Path]) -> dict[str, int]:
    """Instructions of each dumped region, by its name."""
    found: dict[str, int] = {}
    for dump in outputs:
        text = dump.read_text(errors="replace")
        name, total = _NAME.search(text), _TOTALS.search(text)
        if name and total:
            found[name.group(1).strip()] = int(total.group(1))
    return found


def measure(work: Path, root: Path, label: str, calls: int) -> dict[str, float]:
    """Per-call instructions of each region on ``label``'s file, the empty loop taken off."""
    library = build_meter(work)
    template = _file(work, label)
    database = work / f"steps-{label.replace(' ', '')}.db"
    shutil.copyfile(template, database)
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    out = work / f"steps-{label.replace(' ', '')}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p"]
        + [sys.executable, str(_HERE), "--child", str(library), str(database), str(calls)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"},
        check=True,
        capture_output=True,
    )
    counted = regions(iter(sorted(out.iterdir())))
    empty = counted.pop("empty loop")
    return {name: (total - empty) / calls for name, total in counted.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.append_steps")
    parser.add_argument("--calls", type=int, default=200, help="calls per step")
    parser.add_argument("--root", type=Path, default=_HERE.parents[2], help="checkout measured")
    parser.add_argument("--child", nargs=3, metavar=("LIB", "DB", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        library, database, calls = args.child
        child(Path(library), Path(database), int(calls))
        return 0
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        print("needs valgrind and a C compiler (Debian packages valgrind, gcc)", file=sys.stderr)
        return 1
    root = args.root.resolve()
    work = _HERE.parents[1] / ".work" / f"append-steps-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(root))
    try:
        results = {label: measure(work, root, label, args.calls) for label in FILES}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = list(dict.fromkeys(itertools.chain.from_iterable(results.values())))
    print(f"{'step (k instructions per call)':<42}" + "".join(f"{f:>11}" for f in FILES))
    for name in names:
        cells = "".join(
            f"{results[f][name] / 1e3:>11.1f}" if name in results[f] else f"{'-':>11}"
            for f in FILES
        )
        print(f"{name:<42}{cells}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
