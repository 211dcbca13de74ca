"""The CLI start rows: a ``hermes-store`` command's wall time against ``import sqlalchemy``.

What a person waits for is the whole process: interpreter, imports, open,
the query, the rendering. Issue #19 asks for ``current``, ``sessions`` and
``search`` within 1.5 times of ``python -c "import sqlalchemy"`` (the floor
any SQLAlchemy program pays), measured in the same run. Each repetition runs
the baseline and every command once, in a rotating order; the ratio is of
medians. Run on the field corpus (what a user with a big file sees; search
there includes the search itself) and on a small current file (start-up
alone).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..stats import percentile

CLI_TARGET = 1.5
BASELINE = "python -c 'import sqlalchemy'"
FLOOR = "floor: argparse + Core, one line (small file)"
FLOOR_CODE = """
import argparse
from sqlalchemy import create_engine, text
parser = argparse.ArgumentParser(prog="floor")
parser.add_argument("--db", required=True)
args = parser.parse_args()
engine = create_engine(f"sqlite:///{args.db}")
with engine.connect() as connection:
    found = connection.execute(text("SELECT version FROM schema_version")).scalar()
print(f"schema version:   {found}")
"""
"""What any command-line program on SQLAlchemy pays to print one line of a file.

A one-command argparse program that imports SQLAlchemy, opens the file with
Core and prints the schema version: the floor under ``hermes-store current``
(issue #19's 1.5x leaves room for the store's own imports above it).
"""

Log = Callable[[str], None]


def small_current_file(path: Path) -> Path:
    """A current store file with a few sessions (start-up cost without a big file)."""
    from hermes_store import SessionDB

    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = SessionDB(path)
    try:
        for number in range(20):
            session_id = f"small_{number:02d}"
            db.create_session(session_id, "cli", model="anthropic/claude-sonnet-4.6")
            db.append_messages(
                session_id,
                [
                    {"role": "user", "content": f"docker deployment question {number}"},
                    {"role": "assistant", "content": "Check the docker logs first."},
                ],
            )
    finally:
        db.close()
    return path


def compile_package() -> Path:
    """Byte-compile hermes_store where it is imported from, as installing a wheel does.

    The warm-up round alone does not: with ``PYTHONDONTWRITEBYTECODE`` set (as
    it is on the shared machines) no ``.pyc`` is ever written, and every
    command would compile the package's source again, about 60 ms that an
    installed ``hermes-store`` never pays. ``import sqlalchemy`` is read from
    the ``.pyc`` files pip wrote.
    """
    import compileall

    import hermes_store

    package = Path(hermes_store.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise RuntimeError(f"could not byte-compile {package}")
    return package


def commands(files: dict[str, Path]) -> dict[str, list[str]]:
    cli = str(Path(sys.executable).with_name("hermes-store"))
    found = {BASELINE: [sys.executable, "-c", "import sqlalchemy"]}
    if "small file" in files:
        found[FLOOR] = [sys.executable, "-c", FLOOR_CODE, "--db", str(files["small file"])]
    for label, path in files.items():
        for name, args in (
            ("current", ["current"]),
            ("sessions", ["sessions"]),
            ("search docker", ["search", "docker"]),
        ):
            found[f"hermes-store {name} ({label})"] = [cli, *args, "--db", str(path)]
    return found


def cli_rows(files: dict[str, Path], reps: int, cwd: Path, log: Log) -> list[dict[str, Any]]:
    log(f"    byte-compiled {compile_package()}")
    runs = commands(files)
    samples: dict[str, list[float]] = {label: [] for label in runs}
    cpu: dict[str, list[float]] = {label: [] for label in runs}
    labels = list(runs)
    for rep in range(-1, reps):  # one warm-up round: the page cache and .pyc files
        shift = rep % len(labels)
        for label in labels[shift:] + labels[:shift]:
            used = _children_cpu()
            started = time.perf_counter()
            done = subprocess.run(runs[label], cwd=cwd, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            used = _children_cpu() - used
            if done.returncode != 0:
                raise RuntimeError(f"{label} failed: {done.stderr.strip()[-300:]}")
            if rep >= 0:
                samples[label].append(elapsed)
                cpu[label].append(used)
    base = statistics.median(samples[BASELINE])
    base_cpu = statistics.median(cpu[BASELINE])
    rows = []
    for label in labels:
        median = statistics.median(samples[label])
        is_base = label in (BASELINE, FLOOR)
        ratio = median / base
        cpu_median = statistics.median(cpu[label])
        rows.append(
            {
                "command": label,
                "reps": reps,
                "median_s": median,
                "p95_s": percentile(samples[label], 95),
                "ratio": ratio,
                "cpu_median_s": cpu_median,
                "cpu_ratio": cpu_median / base_cpu,
                "target": None if is_base else CLI_TARGET,
                "verdict": (
                    ("base" if label == BASELINE else "floor")
                    if is_base
                    else ("PASS" if ratio <= CLI_TARGET else "MISS")
                ),
                "samples_s": samples[label],
                "cpu_samples_s": cpu[label],
            }
        )
    log(f"    import sqlalchemy {base * 1e3:.0f} ms median over {reps} reps")
    return rows


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children, so far.

    On a loaded machine a command's wall time includes waiting for a core;
    its CPU time does not, so the CPU ratio shows what the load hides.
    """
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime
