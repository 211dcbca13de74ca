"""``python -m bench.micro.instructions [--appends N] [--turns N] [--agent-files]``

Instructions per operation.

Wall and CPU times on a shared machine move 10-20% from run to run; the number
of instructions a process executes for the same work does not. Each
implementation runs under ``valgrind --tool=callgrind`` twice, after the same
warm-up: once with no operations and once with N; the difference divided by N
is its cost per operation, split by where it runs -- SQLite (the SQL both sides
execute), the Python interpreter (each side's own code) and the rest (libc's
memory and system-call wrappers, the sqlite3 and json modules). fsync and
waiting for a lock cost no instructions: this is the CPU work alone, which is
what the contention workload adds up when six writers relay one lock.

``--agent-files`` counts the appends of issue #32 instead: plain on the
document's schema with the trigram index against the store on our head file,
and the agent's append (:mod:`bench.micro.agent_plain`) against the store on files
of the agent's layouts v10, v11 and v25.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..paths import REPO_ROOT, WORK_ROOT
from .corpus import fresh_copy, make_template, sample_turns
from .impls import IMPLS

CASES = (
    ("append", "plain"),
    ("append", "store"),
    ("turn", "plain"),
    ("turn", "plain_tx"),
    ("turn", "store"),
)
_LINE = re.compile(r"\s*([\d,]+) \([^)]*\)\s+.*\[(?P<object>[^\]]*)\]\s*$")


def child(impl_name: str, operation: str, count: int, path: Path) -> None:
    """Open ``path``, warm up (one append, one turn), then run ``count`` operations."""
    impl = IMPLS[impl_name]
    turns = sample_turns(40)
    messages = [message for turn in turns for message in turn]
    db = impl.open(path)
    db.create_session("s1", "cli")
    db.append_message("s1", "user", content="warm up")
    impl.append_turn(db, "s1", turns[-1])
    if operation == "append":
        for index in range(count):
            db.append_message("s1", **messages[index % len(messages)])
    else:
        for index in range(count):
            impl.append_turn(db, "s1", turns[index % len(turns)])
    db.close()


def by_object(profile: Path) -> collections.Counter[str]:
    """Instructions per shared object, from callgrind_annotate's per-function listing."""
    listing = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    totals: collections.Counter[str] = collections.Counter()
    for line in listing.splitlines():
        match = _LINE.match(line)
        if match:
            name = Path(match["object"]).name
            # pysqlite3 (the bundled library) links SQLite into its module: counted as SQLite.
            bundled = "pysqlite3" in match["object"]
            kind = (
                "sqlite"
                if "libsqlite3" in name or bundled
                else "python"
                if "libpython" in name
                else "other"
            )
            totals[kind] += int(match.group(1).replace(",", ""))
    return totals


def measure(work: Path, template: Path, impl: str, operation: str, count: int) -> dict[str, float]:
    """Per-operation instructions by kind, from the runs with 0 and ``count`` operations."""
    runs = []
    for n in (0, count):
        database = fresh_copy(template, work / f"{operation}-{impl}-{n}.db")
        profile = work / f"{operation}-{impl}-{n}.callgrind"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}"]
            + [sys.executable, "-m", "bench.micro.instructions", "--child"]
            + [impl, operation, str(n), str(database)],
            cwd=REPO_ROOT,
            # A fixed hash seed: dict and set layouts, and so the counts, repeat exactly.
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONHASHSEED": "0"},
            check=True,
            capture_output=True,
        )
        runs.append(by_object(profile))
    base, loaded = runs
    return {kind: (loaded[kind] - base[kind]) / count for kind in ("sqlite", "python", "other")}


def agent_files(work: Path, appends: int) -> None:
    """The appends of issue #32, each pair on its own files (see the module's docstring)."""
    from .agent_layouts import AGENT_VERSIONS, agent_template, doc_trigram_template

    head = make_template(work / "template.db")
    pairs = [("head", doc_trigram_template(work), "plain", head)]
    pairs += [(f"agent v{v}", agent_template(work, v), "agent", None) for v in AGENT_VERSIONS]
    print(
        f"{'file':<10} {'impl':<9} {'k instr/op':>11} {'sqlite':>8} {'python':>8} "
        f"{'other':>8} {'vs yardstick':>12}"
    )
    for label, template, yardstick, ours in pairs:
        base = 0.0
        for impl, path in ((yardstick, template), ("store", ours or template)):
            cost = measure(work, path, impl, "append", appends)
            total = sum(cost.values())
            base = base or total
            print(
                f"{label:<10} {impl:<9} {total / 1e3:>11.1f} {cost['sqlite'] / 1e3:>8.1f} "
                f"{cost['python'] / 1e3:>8.1f} {cost['other'] / 1e3:>8.1f} {total / base:>12.3f}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.instructions")
    parser.add_argument("--appends", type=int, default=200, help="appends counted")
    parser.add_argument("--turns", type=int, default=40, help="6-message turns counted")
    parser.add_argument(
        "--agent-files", action="store_true", help="the appends of issue #32 (agent's files)"
    )
    parser.add_argument(
        "--child", nargs=4, metavar=("IMPL", "OP", "N", "DB"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        impl, operation, count, path = args.child
        child(impl, operation, int(count), Path(path))
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("needs valgrind (Debian package valgrind)", file=sys.stderr)
        return 1
    work = WORK_ROOT / f"instructions-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.agent_files:
            agent_files(work, args.appends)
            return 0
        template = make_template(work / "template.db")
        print(
            f"{'operation':<10} {'impl':<9} {'k instr/op':>11} {'sqlite':>8} {'python':>8} "
            f"{'other':>8} {'vs plain':>9}"
        )
        plain_total: dict[str, float] = {}
        for operation, impl in CASES:
            count = args.appends if operation == "append" else args.turns
            cost = measure(work, template, impl, operation, count)
            total = sum(cost.values())
            plain_total.setdefault(operation, total)
            print(
                f"{operation:<10} {impl:<9} {total / 1e3:>11.1f} {cost['sqlite'] / 1e3:>8.1f} "
                f"{cost['python'] / 1e3:>8.1f} {cost['other'] / 1e3:>8.1f} "
                f"{total / plain_total[operation]:>9.3f}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
