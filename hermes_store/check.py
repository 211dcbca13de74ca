"""``check``: is this state.db healthy, and can what is wrong be mended?

Counters (``message_count``, ``tool_call_count``) are derived data kept in
step by every append; FTS is derived data kept in step by triggers. Both can
be rebuilt from ``messages`` without loss, so ``repair=True`` does exactly
that, in one write transaction. Page-level corruption (integrity_check) is
reported, never "repaired": the fix is a backup, not a guess.

On PostgreSQL the same report means (see :class:`MaintenanceRepository`):
``integrity`` -- the ``messages.id`` identity is behind the ids in use
(repaired by moving it forward; page checks belong to the server's own tools,
e.g. ``amcheck``/``pg_checksums``, which this does not run); ``foreign_keys``
-- rows whose session or parent is missing; ``fts`` -- a search index missing
or invalid (repaired by rebuilding it); counters as on SQLite.

On SQLite every full-text index the file has is checked and, when stale,
rebuilt: the word index and the trigram index (see
:data:`~hermes_store.repositories.maintenance.SQLITE_FTS_INDEXES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .repositories.maintenance import MaintenanceRepository
from .store import Store


@dataclass
class CheckReport:
    integrity: list[str] = field(default_factory=list)
    foreign_keys: list[dict[str, Any]] = field(default_factory=list)
    fts: str | None = None
    """What is wrong with the search indexes, in one line; None when they all agree."""
    stale_fts: list[str] = field(default_factory=list)
    """The search indexes that disagree with ``messages`` (or, on PostgreSQL, are missing)."""
    miscounted: list[dict[str, Any]] = field(default_factory=list)
    repaired_counters: int = 0
    rebuilt_fts: bool = False
    repaired_identity: bool = False

    @property
    def ok(self) -> bool:
        """Healthy now: nothing wrong was found, or everything found was repaired."""
        counters_ok = not self.miscounted or self.repaired_counters == len(self.miscounted)
        fts_ok = self.fts is None or self.rebuilt_fts
        integrity_ok = not self.integrity or self.repaired_identity
        return integrity_ok and not self.foreign_keys and counters_ok and fts_ok


def check(store: Store, *, repair: bool = False) -> CheckReport:
    """Run every check; with ``repair``, recompute counters and rebuild FTS if needed."""
    # A write unit even to only look: FTS5's integrity-check is an INSERT, which
    # would take the write lock half-way through a read transaction anyway.
    with store.write() as uow:
        maintenance = MaintenanceRepository(uow.connection)
        fts = maintenance.fts_problems()
        report = CheckReport(
            integrity=maintenance.integrity_problems(),
            foreign_keys=maintenance.foreign_key_problems(),
            fts="; ".join(f"{name} {problem}" for name, problem in fts.items()) or None,
            stale_fts=list(fts),
            miscounted=maintenance.miscounted_sessions(),
        )
        if repair:
            if report.integrity and uow.connection.dialect.name != "sqlite":
                maintenance.repair_identity()  # the only PostgreSQL integrity finding
                report.repaired_identity = True
            maintenance.repair_counters(report.miscounted)
            report.repaired_counters = len(report.miscounted)
            if report.stale_fts:
                maintenance.rebuild_fts(report.stale_fts)
                report.rebuilt_fts = True
    return report
