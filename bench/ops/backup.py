"""``python -m bench.ops.backup [--messages N] [--reps R]``: backup time and size, two ways.

Builds the benchmark corpus (100,000 messages by default, bench/micro/corpus.py)
and, interleaved rep by rep, copies it with SQLite's online backup API (as
``hermes_store.tools.backup`` does, its verification included: that is the whole
``backup()`` call) and with ``VACUUM INTO`` (the copy alone, then the same
``integrity_check``). Prints median and range of each and the file sizes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.backup import backup

from ..micro.corpus import CorpusSpec, build_corpus, make_template
from ..paths import WORK_ROOT

WORK = WORK_ROOT


def vacuum_into(source: Path, target: Path) -> float:
    started = time.perf_counter()
    connection = sqlite3.connect(source, isolation_level=None)
    try:
        connection.execute("VACUUM INTO ?", (str(target),))
    finally:
        connection.close()
    checker = sqlite3.connect(target)
    try:
        assert checker.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        checker.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    work = WORK / "backup"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        corpus = work / "state.db"
        spec = CorpusSpec(total_messages=args.messages, long_session_messages=10_000)
        build_corpus(make_template(work / "template.db"), corpus, spec)
        print(f"corpus: {args.messages:,} messages, {corpus.stat().st_size / 1e6:.1f} MB")
        api: list[float] = []
        vacuum: list[float] = []
        sizes: dict[str, int] = {}
        for rep in range(args.reps):
            for way in ("api", "vacuum") if rep % 2 == 0 else ("vacuum", "api"):
                if way == "api":
                    report = backup(corpus, work / "backups", keep=1)
                    api.append(report.seconds)
                    sizes["api"] = report.bytes
                else:
                    target = work / f"vacuum-{rep}.db"
                    vacuum.append(vacuum_into(corpus, target))
                    sizes["vacuum"] = target.stat().st_size
                    target.unlink()
        for name, times in (
            ("backup() (online backup API + verify)", api),
            ("VACUUM INTO + integrity_check", vacuum),
        ):
            key = "api" if times is api else "vacuum"
            print(
                f"{name}: median {statistics.median(times):.2f} s "
                f"(range {min(times):.2f}-{max(times):.2f} s over {len(times)}), "
                f"{sizes[key] / 1e6:.1f} MB"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
