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

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stats import percentile

CLI_TARGET = 1.5
BASELINE = "python -c 'import sqlalchemy'"

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
    labels = list(runs)
    for rep in range(-1, reps):  # one warm-up round: the page cache and .pyc files
        shift = rep % len(labels)
        for label in labels[shift:] + labels[:shift]:
            started = time.perf_counter()
            done = subprocess.run(runs[label], cwd=cwd, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            if done.returncode != 0:
                raise RuntimeError(f"{label} failed: {done.stderr.strip()[-300:]}")
            if rep >= 0:
                samples[label].append(elapsed)
    base = statistics.median(samples[BASELINE])
    rows = []
    for label in labels:
        median = statistics.median(samples[label])
        is_base = label == BASELINE
        ratio = median / base
        rows.append(
            {
                "command": label,
                "reps": reps,
                "median_s": median,
                "p95_s": percentile(samples[label], 95),
                "ratio": ratio,
                "target": None if is_base else CLI_TARGET,
                "verdict": "base" if is_base else ("PASS" if ratio <= CLI_TARGET else "MISS"),
                "samples_s": samples[label],
            }
        )
    log(f"    import sqlalchemy {base * 1e3:.0f} ms median over {reps} reps")
    return rows
