"""``python -m bench.experiments.rank_window [--small] [--k 500,1000,2000,5000]``

What the rank window costs.

For each query class of bench.field.queries that bm25 ranks (the word and
trigram routes) and each filter variant, the store's search runs with the
rank window K (``hermes_store.repositories.search.RANK_WINDOW``) at several
values and once unbounded; a row gives the time (median and slowest of the
repetitions) and overlap@20: how many of the unbounded top 20 the bounded
top 20 holds. This is how K was chosen (docs/design/search.md). The corpus
is opened for reading only.

What it showed: no bounded window finds the best of all history for the broadest
words, small windows keep most of the top 20 for rarer terms, and the scoring cost
grows with K; that is how ``RANK_WINDOW`` was chosen. Figures: docs/design/search.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from ..field.corpus import FULL, SMALL, ensure
from ..field.queries import CLASSES, FILTERS

UNBOUNDED = 2**62
SHORT_CJK = {"cjk2", "cjk2_ko", "cjk2_none", "mixed_short"}  # LIKE / pair index: no bm25


def _time(call: Any, reps: int) -> tuple[float, float, list[int]]:
    samples, ids = [], []
    for n in range(reps + 1):
        t = time.perf_counter()
        hits = call()
        if n:  # the first call warms the cache
            samples.append(time.perf_counter() - t)
        ids = [hit["id"] for hit in hits]
    return statistics.median(samples), max(samples), ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.rank_window", description=__doc__
    )
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--k", default="500,1000,2000,5000", help="window sizes to try")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = [int(k) for k in args.k.split(",")]
    corpus, _facts = ensure(SMALL if args.small else FULL)

    from hermes_store import SessionDB
    from hermes_store.repositories import search

    print(f"corpus {corpus.name}; load average {os.getloadavg()}")
    header = f"{'class':<26} {'filter':<9} {'unbounded ms':>13} " + " ".join(
        f"{'K=' + str(k) + ' ms':>12} {'ov@20':>5}" for k in sizes
    )
    print(header)
    print("-" * len(header))
    db = SessionDB(corpus)
    try:
        for query_class in CLASSES:
            if query_class.key in SHORT_CJK:
                continue
            for variant, filters in FILTERS.items():

                def run(q: str = query_class.query, f: dict[str, Any] = filters) -> Any:
                    return db.search_messages(q, **f)

                search.RANK_WINDOW = UNBOUNDED
                base_med, _base_max, base = _time(run, max(2, args.reps // 2))
                cells = []
                for k in sizes:
                    search.RANK_WINDOW = k
                    med, slowest, ids = _time(run, args.reps)
                    overlap = len(set(ids) & set(base))
                    cells.append(
                        f"{med * 1e3:>5.1f}/{slowest * 1e3:>5.1f} {overlap:>3}/{len(base):<2}"
                    )
                print(
                    f"{query_class.label:<26} {variant:<9} {base_med * 1e3:>13.0f} "
                    + " ".join(cells),
                    flush=True,
                )
    finally:
        db.close()
    print(f"load average at end {os.getloadavg()}; cells: median/slowest ms, overlap@20")
    return 0


if __name__ == "__main__":
    sys.exit(main())
