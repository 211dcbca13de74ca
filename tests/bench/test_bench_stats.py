"""The benchmark's own arithmetic: spread and p95 behind a verdict, the lock-relay breakdown.

Both turn raw timings into the figures a closing note quotes, so they are
checked on made-up timings whose answers are known.
"""

from __future__ import annotations

import pytest

from bench.micro.writer import relay
from bench.stats import paired_spread, percentile


def test_spread_is_the_middle_half_of_the_paired_ratios() -> None:
    plain = [1.0, 2.0, 1.0, 4.0, 1.0]
    store = [0.5, 1.6, 0.9, 4.0, 1.2]  # ratios 0.5, 0.8, 0.9, 1.0, 1.2
    low, high = paired_spread(store, plain)  # type: ignore[misc]
    assert (low, high) == pytest.approx((0.8, 1.0))


def test_spread_pairs_repetitions_not_sorted_samples() -> None:
    # Store is always half of plain in its own repetition, however much the
    # machine drifts between repetitions.
    # (Against plain's median instead, the ratios would run from 0.2 to 0.8.)
    plain = [1.0, 4.0, 1.0, 4.0]
    store = [0.5, 2.0, 0.5, 2.0]
    assert paired_spread(store, plain) == pytest.approx((0.5, 0.5))


def test_spread_needs_two_repetitions_and_equal_lengths() -> None:
    assert paired_spread([1.0], [1.0]) is None
    with pytest.raises(ValueError):
        paired_spread([1.0, 2.0], [1.0])


def test_percentile_is_the_nearest_rank_never_an_interpolation() -> None:
    assert percentile([3.0, 1.0, 2.0, 7.0, 5.0, 4.0, 6.0], 95) == 7.0  # 7 samples: the slowest
    assert percentile([float(n) for n in range(1, 21)], 95) == 19.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    with pytest.raises(ValueError):
        percentile([], 95)
    with pytest.raises(ValueError):
        percentile([1.0], 0)


def _report(*spans: tuple[float, float]) -> dict[str, object]:
    return {"spans": list(spans)}


def test_relay_counts_handoffs_and_splits_idle_time() -> None:
    ms = 1e-3
    writer_a = _report((0.0, 0.3 * ms), (0.31 * ms, 0.6 * ms), (0.61 * ms, 0.9 * ms))
    # B starts 50 ms after A's last release (the others slept), then keeps the lock.
    writer_b = _report((50.9 * ms, 51.9 * ms), (51.91 * ms, 52.2 * ms))
    result = relay([writer_a, writer_b])
    assert result["handoffs"] == 1
    assert result["again"] == pytest.approx(3 / 4)
    assert result["hold_after_handoff_ms"] == pytest.approx(1.0)
    assert result["hold_steady_ms"] == pytest.approx(0.29)
    assert result["idle_short_ms"] == pytest.approx(0.03, abs=1e-6)
    assert result["idle_long_ms"] == pytest.approx(50.0)


def test_relay_needs_two_spans() -> None:
    assert relay([_report((0.0, 1.0))]) == {}
