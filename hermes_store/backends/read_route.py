"""Where a read unit of work goes when the store has a read replica (``read_url``).

A streaming replica answers reads and takes load off the primary, but it is
behind by however long replay takes, and it may be down. The store's rule:
a read goes to the replica only while the replica is up and its lag is within
``max_replica_lag`` seconds, and not right after this process's own write (a
read-your-writes call: within the bound of that write the replica may not
have it yet); otherwise it goes to the primary. Falling back is never an
error -- the primary can always answer a read.

This module is the neutral part: a :class:`ReadRoute` asks its backend's
``measure`` for a :class:`ReplicaReading` (PostgreSQL's is in
:mod:`hermes_store.backends.postgresql.replicas`), keeps it for ``recheck_s``
seconds so that reads pay for no probe of their own, and decides.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from hermes_store.domain.arguments import number_arg

READ_URL_ENV = "HERMES_STORE_READ_URL"
"""The replica the CLI's reading commands read from, when --read-url does not say."""
DEFAULT_MAX_LAG_S = 5.0
"""Seconds a replica may be behind the primary and still answer reads."""
DEFAULT_RECHECK_S = 1.0
"""Seconds a reading of the replica's state is trusted before it is taken again."""


class ReplicaState(enum.Enum):
    """What the last probe found."""

    DOWN = "down"
    """Unreachable (refused, timed out, failed a query): reads go to the primary."""
    LAGGING = "lagging"
    """Up, but further behind than the bound: reads go to the primary."""
    OK = "ok"
    """Up and within the bound: reads go to it."""


@dataclass(frozen=True)
class ReplicaReading:
    """One probe's answer: the state, and the lag in seconds (None when down or unknown)."""

    state: ReplicaState
    lag_s: float | None
    detail: str = ""
    """Why, in words: the error of a replica found down, or how far behind one is."""


_last_writes: dict[str, float] = {}
"""Per primary (its URL), when this process last committed a write there (monotonic)."""
_writes_lock = threading.Lock()


class ReadRoute:
    """Decides, per read unit, between the replica and the primary (see the module docstring).

    ``measure(max_lag_s)`` is the backend's probe: it never raises, a failure
    is a reading of :attr:`ReplicaState.DOWN`. ``engine`` is the replica's,
    for the store's read units; ``primary_key`` names the primary among this
    process's stores, so that a write made through any of them counts.
    """

    def __init__(
        self,
        engine: Engine,
        measure: Callable[[float], ReplicaReading],
        *,
        primary_key: str,
        max_lag_s: float = DEFAULT_MAX_LAG_S,
        recheck_s: float = DEFAULT_RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.max_lag_s = number_arg("max_replica_lag", max_lag_s, minimum=0.0)
        self.recheck_s = number_arg("recheck_s", recheck_s, minimum=0.0)
        self._measure = measure
        self._primary_key = primary_key
        self._clock = clock
        self._lock = threading.Lock()
        self._reading: ReplicaReading | None = None
        self._read_at = float("-inf")

    def reading(self) -> ReplicaReading:
        """The replica's state, probed again when the last reading is older than ``recheck_s``.

        One thread probes while the others keep the old reading (or, before
        any, wait for the first): a probe costs a round trip to each server.
        """
        now = self._clock()
        if self._reading is not None and now - self._read_at < self.recheck_s:
            return self._reading
        with self._lock:
            if self._reading is None or self._clock() - self._read_at >= self.recheck_s:
                self._reading = self._measure(self.max_lag_s)
                self._read_at = self._clock()
            return self._reading

    def use_replica(self) -> bool:
        """True when the next read unit should go to the replica."""
        with _writes_lock:
            wrote = _last_writes.get(self._primary_key)
        if wrote is not None and self._clock() - wrote < self.max_lag_s:
            return False  # read-your-writes: the replica may not have replayed it yet
        return self.reading().state is ReplicaState.OK

    def note_write(self) -> None:
        """This process committed a write on the primary: its next reads go there too."""
        now = self._clock()
        with _writes_lock:
            _last_writes[self._primary_key] = now

    def note_down(self, error: BaseException) -> None:
        """A read unit could not begin on the replica: mark it down until the next recheck."""
        with self._lock:
            self._reading = ReplicaReading(ReplicaState.DOWN, None, _first_line(error))
            self._read_at = self._clock()

    def close(self) -> None:
        """Close the replica's idle pooled connections (a later read reconnects)."""
        self.engine.pool.dispose()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
