"""Progress of a long command as plain lines on stderr, every few seconds.

A bar redraws one terminal line, which a log file, a CI job or ``ssh host cmd
2>log`` never shows; a line every few seconds reads the same everywhere and
still says whether the command moves: rows done, rows per second since the
phase began, and the time left at that rate.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

EVERY_S = 3.0
"""Seconds between two lines of one phase (its first and last line always show)."""


def _duration(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


class ProgressLines:
    """``progress(phase, done, total)`` writing a line per phase every :data:`EVERY_S` seconds."""

    def __init__(
        self,
        verb: str,
        stream: TextIO | None = None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._verb = verb
        self._stream = stream
        self._every = every_s
        self._clock = clock
        self._phase: str | None = None
        self._started = 0.0
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self._clock()
        if phase != self._phase:
            self._phase, self._started, self._last = phase, now, now
            self._write(f"{self._verb} {phase}: starting, {total:,} to do")
            return
        if done < total and now - self._last < self._every:
            return
        self._last = now
        elapsed = max(now - self._started, 1e-9)
        rate = done / elapsed
        share = f" ({100 * done / total:.0f}%)" if total else ""
        left = f", ETA {_duration((total - done) / rate)}" if rate > 0 and done < total else ""
        ended = f", done in {_duration(elapsed)}" if done >= total else ""
        self._write(
            f"{self._verb} {phase}: {done:,} of {total:,}{share}, {rate:,.0f}/s{left}{ended}"
        )

    def _write(self, line: str) -> None:
        stream = self._stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()
