"""``python -m bench.experiments.pair_triggers [--sizes 200,2000,...] [--repeat N]``

The cost of one append by text size, on three files made side by side: at
revision 0011 (the CJK pair triggers of 0009, which cut every piece from the
whole text), at head (0012's, which cut each piece from the one above) and at
0008 (both FTS5 indexes, no pair index: the floor). Every append is written
by plain ``sqlite3``, so what differs is only what the file's triggers do.
Three kinds of text: CJK-dense, Latin with a CJK word every 30 characters,
and accented Latin with no CJK pair (non-ASCII, so the triggers look at it).
Prints the median wall time per append and the ratios. 0011 is skipped above
``--old-max`` characters: it grows with the square of the size.

What it showed: revision 0012's CJK pair triggers (each piece cut from the one above)
cost what 0011's did on short texts and grow linearly, not with the square of the size,
on long ones. Figures and the decision: docs/design/search.md (the CJK pair index).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hermes_store import Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import upgrade

TEXTS: dict[str, Callable[[int], str]] = {
    "cjk": lambda n: ("这是一个很长的中文文本用来测试索引的速度" * (n // 20 + 1))[:n],
    "mixed": lambda n: ("lorem ipsum dolor sit amet, 中文 é ✓ " * (n // 30 + 1))[:n],
    "accents": lambda n: ("café résumé naïve ✓ déjà vu, the build failed " * (n // 45 + 1))[:n],
}


def _store_file(directory: Path, revision: str) -> Path:
    path = directory / f"at-{revision}.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, revision)
    store.close()
    return path


def _append_seconds(path: Path, text: str, repeat: int) -> float:
    """Median wall time of one append by plain ``sqlite3`` (the triggers do the work)."""
    times = []
    with sqlite3.connect(path, isolation_level=None) as connection:
        connection.execute(
            "INSERT OR IGNORE INTO sessions (id, source, started_at) VALUES ('b', 'cli', 1.0)"
        )
        for _ in range(repeat):
            started = time.perf_counter()
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "VALUES ('b', 'user', ?, 1.0)",
                (text,),
            )
            connection.execute("COMMIT")
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="200,2000,20000,200000,1048576,4194304")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--old-max", type=int, default=1_048_576)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        old, head = _store_file(directory, "0011"), _store_file(directory, "head")
        plain_path = _store_file(directory, "0008")
        print(
            f"{'text':8} {'chars':>9} {'0008':>10} {'0011':>10} {'head':>10} "
            f"{'0011/head':>9} {'head/0008':>10}"
        )
        for kind, make in TEXTS.items():
            for size in sizes:
                text = make(size)
                repeat = max(1, args.repeat if size <= 200_000 else args.repeat // 2)
                plain = _append_seconds(plain_path, text, repeat)
                new = _append_seconds(head, text, repeat)
                was = _append_seconds(old, text, repeat) if size <= args.old_max else None
                speedup = f"{was / new:9.1f}" if was is not None else f"{'-':>9}"
                was_text = f"{was * 1e3:8.1f}ms" if was is not None else f"{'skipped':>10}"
                print(
                    f"{kind:8} {size:9d} {plain * 1e3:8.1f}ms {was_text} {new * 1e3:8.1f}ms "
                    f"{speedup} {new / plain:10.1f}"
                )


if __name__ == "__main__":
    main()
