"""One row of the field benchmark: interleaved samples of store and plain, and a verdict.

The targets of issue #19 are absolute (search p95 <= 50 ms, a listing <= 5
ms), not ratios: being at parity with plain is not the goal there. So a row
judges the store's own p95 or median against its target, and prints the
ratio to plain and the spread of the per-repetition ratios beside it, for
the reader who wants to know whether the machine or the code moved.

Repetitions alternate plain/store and store/plain. A fast row gets more
repetitions (up to ``max_reps``, within a time budget) so its p95 means
something; a slow one stops at ``min_reps``, where the p95 is the slowest
sample -- said so in the table's header.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..stats import paired_spread, percentile


@dataclass
class Row:
    section: str
    label: str
    variant: str
    target_s: float | None
    judged_on: str  # "p95" or "median"
    store_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)
    store_hits: int | None = None
    plain_hits: int | None = None
    matches: int | None = None
    agreement: str = ""

    def median(self, side: str) -> float:
        return statistics.median(self.store_s if side == "store" else self.plain_s)

    def p95(self, side: str) -> float:
        return percentile(self.store_s if side == "store" else self.plain_s, 95)

    @property
    def ratio(self) -> float:
        return self.median("store") / self.median("plain")

    @property
    def spread(self) -> tuple[float, float] | None:
        return paired_spread(self.store_s, self.plain_s)

    @property
    def verdict(self) -> str:
        """PASS/MISS on the judged statistic; ``~`` when median and p95 fall either side."""
        if self.target_s is None:
            return "info"
        judged = self.p95("store") if self.judged_on == "p95" else self.median("store")
        verdict = "PASS" if judged <= self.target_s else "MISS"
        low, high = sorted((self.median("store"), self.p95("store")))
        if low <= self.target_s < high:
            verdict += "~"
        return verdict

    def as_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "label": self.label,
            "variant": self.variant,
            "target_s": self.target_s,
            "judged_on": self.judged_on,
            "reps": len(self.store_s),
            "median_s": {"store": self.median("store"), "plain": self.median("plain")},
            "p95_s": {"store": self.p95("store"), "plain": self.p95("plain")},
            "ratio": self.ratio,
            "paired_ratio_iqr": self.spread,
            "verdict": self.verdict,
            "hits": {"store": self.store_hits, "plain": self.plain_hits},
            "matches": self.matches,
            "agreement": self.agreement,
            "samples_s": {"store": self.store_s, "plain": self.plain_s},
        }


@dataclass(frozen=True)
class Reps:
    min_reps: int = 7
    max_reps: int = 41
    budget_s: float = 6.0
    """Stop adding repetitions past ``min_reps`` once a row has taken this long."""
    warmup: int = 1


def interleave(
    row: Row,
    store: Callable[[], Any],
    plain: Callable[[], Any],
    reps: Reps,
) -> tuple[Any, Any]:
    """Fill ``row``'s samples; returns the last result of each side (for the cross-check)."""
    results: dict[str, Any] = {}
    sides = (("plain", plain), ("store", store))
    started = time.perf_counter()
    done = -reps.warmup
    while done < reps.min_reps or (
        done < reps.max_reps and time.perf_counter() - started < reps.budget_s
    ):
        for name, call in sides if done % 2 == 0 else sides[::-1]:
            gc.collect()
            t = time.perf_counter()
            results[name] = call()
            elapsed = time.perf_counter() - t
            if done >= 0:
                (row.store_s if name == "store" else row.plain_s).append(elapsed)
        done += 1
    return results["store"], results["plain"]
