"""The few statistics the benchmarks print: a percentile, and the spread of paired ratios.

Kept apart from the runners so their arithmetic can be tested on made-up
timings whose answers are known (``tests/bench/test_bench_stats.py``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile: a value that was measured, never interpolated.

    With few samples the p95 is simply the slowest one (7 samples: the 7th),
    which is the honest reading of "95% of calls were at least this fast".
    """
    if not values:
        raise ValueError("no values")
    if not 0 < p <= 100:
        raise ValueError(f"p must be in (0, 100], got {p}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def paired_spread(store: Sequence[float], plain: Sequence[float]) -> tuple[float, float] | None:
    """The middle half (25th-75th percentile) of the per-repetition ratios store/plain.

    Each repetition runs both sides back to back, so its ratio cancels most
    of a shared machine's drift; the spread of those ratios says how far the
    verdict can be trusted. A target inside it is marked ``~``: the verdict
    would flip on another run. None with fewer than two repetitions.
    """
    ratios = [s / p for s, p in zip(store, plain, strict=True)]
    if len(ratios) < 2:
        return None
    low, _median, high = statistics.quantiles(ratios, n=4, method="inclusive")
    return low, high
