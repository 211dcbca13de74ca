"""How a writer waits for the write lock: the one contention policy both backends follow.

SQLite turns it into ``BEGIN IMMEDIATE`` retried with jitter and a busy
timeout; PostgreSQL into ``lock_timeout`` and a retry of aborted writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_store.domain.arguments import int_arg, number_arg
from hermes_store.errors import InvalidInputError


@dataclass(frozen=True)
class ContentionPolicy:
    """How long and how a writer waits for the lock; the document's numbers by default.

    ``patience_s`` is a time budget rather than the document's 15 attempts:
    15 x 20-150 ms is about 1.3 s, and a sibling running VACUUM or a large
    checkpoint holds the lock for longer than that.
    """

    patience_s: float = 30.0
    jitter_min_s: float = 0.020
    jitter_max_s: float = 0.150
    busy_timeout_ms: int = 1000
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        # InvalidInputError is a ValueError: a policy that makes no sense opens nothing.
        number_arg("patience_s", self.patience_s, minimum=0.0)
        number_arg("jitter_min_s", self.jitter_min_s, minimum=0.0)
        number_arg("jitter_max_s", self.jitter_max_s, minimum=0.0)
        if not self.jitter_min_s <= self.jitter_max_s:
            raise InvalidInputError(
                f"need 0 <= jitter_min_s <= jitter_max_s, got {self.jitter_min_s}, "
                f"{self.jitter_max_s}"
            )
        int_arg("busy_timeout_ms", self.busy_timeout_ms, minimum=0)
        int_arg("checkpoint_every", self.checkpoint_every, minimum=1)

    def busy_timeout_for(self, patience_s: float) -> int:
        """The busy timeout (ms) a wait of ``patience_s`` may use: never more than the patience.

        SQLite's busy handler waits inside one attempt; left at 1 s, a
        patience of 0 would still wait a whole second before failing.
        """
        return int(min(self.busy_timeout_ms, patience_s * 1000))  # no int() of an infinity
