"""``check``: is this state.db healthy, and can what is wrong be mended?

Counters (``message_count``, ``tool_call_count``) are derived data kept in
step by every append; FTS and revision 0011's totals (the message count, the
usage per model) are derived data kept in step by triggers. All can be
rebuilt from the tables without loss, so ``repair=True`` does exactly that,
in one write transaction. Page-level corruption (integrity_check) is
reported, never "repaired": the fix is a backup, not a guess.

On PostgreSQL the same report means (see :class:`MaintenanceRepository`):
``integrity`` -- the ``messages.id`` identity is behind the ids in use
(repaired by moving it forward; page checks belong to the server's own tools,
e.g. ``amcheck``/``pg_checksums``, which this does not run); ``foreign_keys``
-- rows whose session or parent is missing; ``fts`` -- a search index missing
or invalid (repaired by rebuilding it); counters as on SQLite.

On SQLite every full-text index the file has is checked and, when stale,
rebuilt, in whichever layout the file keeps it (ours, or one of the agent's
own schema versions: see :mod:`hermes_store.backends.layout`).

A SQLite file with damaged pages gets a survey instead of the later checks
(which would only stop at the first damaged page): which tables and indexes
are damaged, and how many sessions and messages can still be read against
what the file's counters claim (:mod:`hermes_store.tools.recovery.survey`).
Nothing is repaired then: the way out is a backup or ``recover``.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from hermes_store.backends.layout import Layout
from hermes_store.backends.sqlite import library
from hermes_store.backends.sqlite.health import check_fts_indexes
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.stored_text import rewrite_undecodable, undecodable_rows
from hermes_store.errors import ReadOnlyStoreError, StoreCorruptError
from hermes_store.repositories.maintenance import MaintenanceRepository
from hermes_store.tools.recovery.survey import DamageSurvey, survey
from hermes_store.uow.store import Store


@dataclass
class CheckReport:
    integrity: list[str] = field(default_factory=list)
    foreign_keys: list[dict[str, Any]] = field(default_factory=list)
    fts: str | None = None
    """What is wrong with the search indexes, in one line; None when they all agree."""
    stale_fts: list[str] = field(default_factory=list)
    """The search indexes that disagree with ``messages`` (or, on PostgreSQL, are missing)."""
    unchecked_fts: dict[str, str] = field(default_factory=dict)
    """Search indexes the file has that this process cannot check (a tokenizer it lacks)."""
    miscounted: list[dict[str, Any]] = field(default_factory=list)
    repaired_counters: int = 0
    totals: list[str] = field(default_factory=list)
    """What revision 0011's kept totals (message count, usage per model) get wrong."""
    repaired_totals: bool = False
    rebuilt_fts: bool = False
    repaired_identity: bool = False
    undecodable: list[dict[str, Any]] = field(default_factory=list)
    """SQLite only: text values that are not UTF-8, each as table, id and column."""
    rewrote_undecodable: bool = False
    """Those values were stored again as the text they read as (U+FFFD for the bad bytes)."""
    damage: DamageSurvey | None = None
    """SQLite pages found damaged: the survey of what still reads (nothing else was run)."""
    sqlite_library: str | None = None
    """SQLite only: the release the store's connections link, and the module that links it."""
    sqlite_affected: bool | None = None
    """SQLite only: whether that release has the WAL-reset bug (a warning, not a finding)."""

    @property
    def ok(self) -> bool:
        """Healthy now: nothing wrong was found, or everything found was repaired."""
        counters_ok = not self.miscounted or self.repaired_counters == len(self.miscounted)
        fts_ok = self.fts is None or self.rebuilt_fts
        integrity_ok = not self.integrity or self.repaired_identity
        totals_ok = not self.totals or self.repaired_totals
        text_ok = not self.undecodable or self.rewrote_undecodable
        return (
            integrity_ok
            and not self.foreign_keys
            and counters_ok
            and fts_ok
            and totals_ok
            and text_ok
        )


def check(store: Store, *, repair: bool = False) -> CheckReport:
    """Run every check; with ``repair``, recompute counters and rebuild FTS if needed."""
    report = CheckReport()
    if store.engine.dialect.name == "sqlite":
        report.sqlite_library = f"{library.VERSION} ({library.MODULE})"
        report.sqlite_affected = library.AFFECTED
    try:
        _run(store, report, repair)
    except StoreCorruptError as error:  # a later check met a page integrity_check missed
        report.integrity = report.integrity or [error.detail]
    if report.integrity and store.path is not None and store.engine.dialect.name == "sqlite":
        report.damage = survey(store.path)
    return report


def _run(store: Store, report: CheckReport, repair: bool) -> None:
    # A write unit even to only look: FTS5's integrity-check is an INSERT, which
    # would take the write lock half-way through a read transaction anyway. A
    # read-only store looks in a read unit and checks FTS on a connection of its
    # own (see _fts_of_read_only).
    if store.read_only and repair:
        raise ReadOnlyStoreError(f"{store.path or store.url}: a read-only store cannot repair")
    with store.read() if store.read_only else store.write() as uow:
        maintenance = MaintenanceRepository(uow.connection, uow.layout)
        report.integrity = maintenance.integrity_problems()
        if report.integrity and uow.connection.dialect.name == "sqlite":
            return  # damaged pages: the other checks would stop at them; nothing is mended
        report.foreign_keys = maintenance.foreign_key_problems()
        driver = uow.connection.connection.driver_connection
        if uow.connection.dialect.name == "sqlite":
            report.undecodable = undecodable_rows(cast(sqlite3.Connection, driver))
        if store.read_only and store.path is not None:
            fts, report.unchecked_fts = _fts_of_read_only(store.path, uow.layout, store)
        else:
            fts = maintenance.fts_problems()
            report.unchecked_fts = maintenance.unchecked_fts()
        report.fts = "; ".join(f"{name} {problem}" for name, problem in fts.items()) or None
        report.stale_fts = list(fts)
        report.miscounted = maintenance.miscounted_sessions()
        report.totals = maintenance.totals_problems()
        if repair:
            if report.integrity and uow.connection.dialect.name != "sqlite":
                maintenance.repair_identity()  # the only PostgreSQL integrity finding
                report.repaired_identity = True
            if report.undecodable:  # before the indexes are rebuilt from the text
                rewrite_undecodable(cast(sqlite3.Connection, driver), report.undecodable)
                report.rewrote_undecodable = True
            maintenance.repair_counters(report.miscounted)
            report.repaired_counters = len(report.miscounted)
            if report.stale_fts:
                maintenance.rebuild_fts(report.stale_fts)
                report.rebuilt_fts = True
            if report.totals:
                maintenance.repair_totals()
                report.repaired_totals = True


def _fts_of_read_only(
    path: Path, layout: Layout, store: Store
) -> tuple[dict[str, str], dict[str, str]]:
    """FTS problems of a file a read-only store holds: (stale indexes, unchecked ones).

    FTS5's check is an INSERT, which a ``mode=ro`` connection refuses; where
    this process may write the file it runs on a connection opened for it
    alone (``mode=rw``: never creates), in a transaction rolled back after,
    so nothing is written. It takes the write lock while it runs, like any
    FTS5 check. The store's own connection stays open meanwhile, so closing
    this one is never the last close that would checkpoint the file.
    """
    unchecked = {
        index.name: f"not checked: its tokenizer {index.tokenizer!r} cannot be loaded here"
        for index in layout.fts_indexes()
        if not index.usable
    }
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        unchecked.update(
            {
                index.name: "not checked: the file is read-only for this process"
                for index in layout.fts_indexes()
                if index.usable
            }
        )
        return {}, unchecked
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=rw"
    timeout = store.policy.patience_s
    connection = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout)
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            return check_fts_indexes(connection, layout), unchecked
        finally:
            connection.execute("ROLLBACK")
    finally:
        connection.close()
