"""``recover``: salvage a damaged state.db into a new file at the head schema.

The source is never written, and SQLite never opens it: opening a WAL
database can run recovery on its ``-shm``, checkpoint its ``-wal`` into it
and delete the ``-wal`` on close, each a write to the evidence. So the file
and its ``-wal``/``-shm`` are first copied byte for byte into a scratch
folder beside the target; SQLite applies the WAL to that copy, and the
pages of the copy are read by :mod:`~hermes_store.tools.recovery.salvage`.
The new file is built in the same folder; a run killed half-way leaves the
folder behind, and the next ``recover`` or ``check`` there removes it
(:mod:`~hermes_store.tools.recovery.scratch`).

The new file is made by :class:`~hermes_store.Store` like any other (the
Alembic chain to head, 0600), then filled in batches: sessions (lineage set
afterwards, where the parent was salvaged too), a stand-in session for
messages whose session row was lost (``source = 'unknown'``, as
``ensure_session`` makes one), messages with their ids (the FTS triggers
index them, so the file is searchable). Counters are recomputed from the
salvaged messages; token and cost totals stay as the session rows had them.
The id sequence is moved past the largest id the damaged file had handed out,
so a lost id is never reused. The file is built under a temporary name,
checked (``integrity_check``, counts) and only then renamed to the target.

A row the new file refuses (none should: the salvage keeps only rows with
every required column) is left out on its own, with a note; every failure
of the run is a :class:`RecoveryError`.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, insert, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from hermes_store.backends.layout import BIGRAM_TABLE, KEEPING_COLUMNS, STANDARD
from hermes_store.backends.shapes import writable_sessions
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreError
from hermes_store.repositories.maintenance import MaintenanceRepository
from hermes_store.repositories.messages import insert_rows
from hermes_store.schema.bigram_index import driver_connection, fill_bigrams
from hermes_store.schema.tables import messages_table, sessions_table
from hermes_store.schema.totals import MESSAGE_TOTAL_TABLE, fill_totals
from hermes_store.tools.backup import COUNT_ROWS
from hermes_store.tools.disk import require_free_space, sync
from hermes_store.tools.recovery.salvage import Salvage, id_ranges, salvage
from hermes_store.tools.recovery.scratch import scratch_folder
from hermes_store.uow.store import Store

SIDECARS = ("-wal", "-shm")
BATCH = 1000
SCRATCH_PREFIX = ".hermes-recover-"


class RecoveryError(StoreError):
    """The recovery could not start or finish; the source is untouched either way."""


@dataclass
class RecoveryReport:
    """What came back, against what the damaged file claims it held."""

    source: Path
    target: Path
    sessions_recovered: int = 0
    messages_recovered: int = 0
    sessions_claimed: int = 0
    """Session ids the damaged file knows of: its rows, its key index, its messages."""
    messages_claimed: int = 0
    """What the salvaged sessions' ``message_count`` counters add up to."""
    messages_indexed: int = 0
    """Message ids listed by the damaged file's ``idx_messages_session``."""
    sessions_rebuilt: list[str] = field(default_factory=list)
    """Sessions whose row was lost, remade from their messages (source 'unknown')."""
    unread_ranges: list[tuple[int, int]] = field(default_factory=list)
    """Message ids the file lists or whose pages it points at, that could not be read."""
    damaged_pages: int = 0
    orphan_rows: int = 0
    conflicting_rows: int = 0
    """Stale copies of rows (found outside the trees, their id already read) left out."""
    rows_refused: int = 0
    """Salvaged rows the new file would not take (each named in ``notes``)."""
    wal_applied: bool | None = None
    """True: the ``-wal`` was applied to the copy; None: there was none."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def recover(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> RecoveryReport:
    """Salvage ``source`` (a damaged SQLite file) into the new file ``target``."""
    started = time.monotonic()
    origin, goal = _checked_paths(source, target)
    report = RecoveryReport(source=origin, target=goal)
    sizes = [_size(origin, suffix) for suffix in ("", *SIDECARS)]
    require_free_space(goal.parent, 2 * sizes[0] + sizes[1], "recovery", RecoveryError)
    try:
        with scratch_folder(goal.parent, SCRATCH_PREFIX) as scratch:
            copy = scratch / "source" / origin.name
            copy.parent.mkdir(mode=0o700)
            for suffix in ("", *SIDECARS):
                if Path(f"{origin}{suffix}").exists():
                    shutil.copyfile(f"{origin}{suffix}", f"{copy}{suffix}")
            report.wal_applied = _apply_wal(copy, report)
            found = salvage(copy)
            _describe(found, report)
            building = scratch / goal.name
            _build(found, building, report)
            os.rename(building, goal)
            sync(goal.parent)
    except StoreError:
        raise  # already named (a full disk, a locked file ...)
    except (SQLAlchemyError, sqlite3.Error, OSError) as error:
        raise RecoveryError(f"recover stopped, nothing was written to {goal}: {error}") from error
    report.seconds = time.monotonic() - started
    return report


def _checked_paths(
    source: str | os.PathLike[str], target: str | os.PathLike[str]
) -> tuple[Path, Path]:
    text_source = os.fspath(source)
    if "://" in text_source and not text_source.startswith("sqlite"):
        raise RecoveryError(
            "recover reads a SQLite file; a PostgreSQL database is repaired with the "
            "server's tools and restored from pg_dump"
        )
    origin = Path(text_source.split(":///", 1)[-1]).expanduser()
    goal = Path(target).expanduser()
    if not origin.is_file():
        raise RecoveryError(f"no database file at {origin} (--from)")
    if goal.exists() or goal.is_symlink():
        raise RecoveryError(f"{goal} already exists: recover writes a new file (--to)")
    if not goal.parent.is_dir():
        raise RecoveryError(f"no directory {goal.parent} for {goal.name} (--to)")
    if goal.resolve() == origin.resolve():
        raise RecoveryError("--from and --to name the same file")
    return origin, goal


def _size(path: Path, suffix: str) -> int:
    candidate = Path(f"{path}{suffix}")
    return candidate.stat().st_size if candidate.exists() else 0


def _apply_wal(copy: Path, report: RecoveryReport) -> bool | None:
    """Let SQLite apply the copied ``-wal`` to the copy (a TRUNCATE checkpoint)."""
    wal = Path(f"{copy}-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return None
    try:
        connection = sqlite3.connect(copy, isolation_level=None)
        try:
            busy, _log, _done = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as error:
        report.notes.append(f"the -wal could not be applied ({error}): read without it")
        return False
    if busy:
        report.notes.append("the -wal could only be applied in part")
    return not busy


def _describe(found: Salvage, report: RecoveryReport) -> None:
    recovered = set(found.messages)
    candidates = set(found.indexed_message_ids)
    for page in found.message_damage:
        if page.low is not None and page.high is not None and page.high - page.low < 1_000_000:
            candidates.update(range(page.low + 1, page.high + 1))
    report.unread_ranges = id_ranges(candidates - recovered)
    report.messages_indexed = len(found.indexed_message_ids)
    report.messages_claimed = found.counted_messages
    report.sessions_claimed = len(found.claimed_session_ids)
    report.damaged_pages = sum(len(tree.damaged_pages) for tree in found.trees)
    report.orphan_rows = found.orphan_rows
    report.conflicting_rows = found.conflicting_rows
    if not found.header_valid:
        report.notes.append("the file header was damaged: read as 4096-byte UTF-8 pages")
    if not found.schema_complete:
        report.notes.append("part of the schema was unreadable: rows were found by their shape")
    if not found.freelist_complete:
        report.notes.append("the freelist was damaged: some deleted rows may have come back")
    if found.renamed_columns:
        report.notes.append(
            "the schema text had lost column names, read as ours: "
            + ", ".join(found.renamed_columns)
        )
    if found.dropped_columns:
        report.notes.append(
            "columns the head schema does not have were left out: "
            + ", ".join(found.dropped_columns)
        )
    if found.conflicting_rows:
        report.notes.append(
            f"{found.conflicting_rows} stale copies of rows were skipped (a newer copy was read)"
        )


def _complete(row: dict[str, Any], table: Any) -> dict[str, Any]:
    """Every column of the table, so one statement takes the whole batch.

    A column an older file did not have gets its default: 0 for the counters
    (their server default), NULL for the rest.
    """
    return {
        column.name: row.get(column.name, 0 if column.server_default is not None else None)
        for column in table.columns
    }


def _build(found: Salvage, path: Path, report: RecoveryReport) -> None:
    sessions = [_complete(row, sessions_table) for row in _sessions_to_write(found, report)]
    messages = [_complete(found.messages[key], messages_table) for key in sorted(found.messages)]
    with Store(path) as store:
        sessions = _insert(store, sessions, _insert_sessions, "session", report)
        links = [
            {"p_id": row["id"], "p_parent": parent}
            for row in sessions
            if (parent := found.sessions.get(row["id"], {}).get("parent_session_id"))
            and parent in found.sessions
        ]
        lost_parents = sum(
            1
            for row in found.sessions.values()
            if row.get("parent_session_id") and row["parent_session_id"] not in found.sessions
        )
        if lost_parents:
            report.notes.append(f"{lost_parents} session(s) lost their parent: kept as roots")
        with store.write() as uow:
            if links:
                uow.connection.execute(_LINK_PARENT, links)
            for session_id, archived, pinned in _flags(found, sessions):
                uow.keeping.restore_flags(session_id, archived=archived, pinned=pinned)
        with store.write() as uow:
            triggers = _drop_index_triggers(uow.connection)
        messages = _insert(store, messages, _insert_messages, "message", report)
        with store.write() as uow:
            _rebuild_indexes(uow.connection, triggers)
            maintenance = MaintenanceRepository(uow.connection)
            maintenance.repair_counters(maintenance.miscounted_sessions())
            if found.sequence is not None:
                uow.connection.execute(_MOVE_SEQUENCE, {"seq": found.sequence})
    _verify(path, len(sessions), len(messages))
    report.sessions_recovered = len(sessions)
    report.messages_recovered = len(messages)


_INSERT_TRIGGERS = text(
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages' "
    "AND sql LIKE '%AFTER INSERT ON messages%'"
)
_FTS_TABLES = text(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' "
    "AND lower(replace(sql, ' ', '')) LIKE '%usingfts5(%content=messages%'"
)


def _drop_index_triggers(connection: Connection) -> list[str]:
    """Take the FTS insert triggers off for the bulk load; their SQL, to put them back.

    Indexing 20,000 messages row by row through two FTS5 triggers takes most
    of a recovery; building each index once from the finished table
    (``'rebuild'``) gives the same index in a fraction of the time. The file
    is not the target yet: if the process dies half-way it is discarded.
    """
    triggers = [(str(name), str(sql)) for name, sql in connection.execute(_INSERT_TRIGGERS)]
    for name, _sql in triggers:
        connection.exec_driver_sql(f'DROP TRIGGER "{name}"')
    return [sql for _name, sql in triggers]


def _rebuild_indexes(connection: Connection, triggers: list[str]) -> None:
    """Every FTS index, the CJK pair index and the kept totals built afresh; the triggers back.

    The totals' message count was one of the triggers taken off: it is counted
    here, in the transaction that puts the triggers back.
    """
    for (name,) in connection.execute(_FTS_TABLES).all():
        connection.exec_driver_sql(f'INSERT INTO "{name}"("{name}") VALUES (\'rebuild\')')
    if connection.execute(_HAS_BIGRAM_TABLE).first() is not None:  # revision 0009's pair index
        fill_bigrams(driver_connection(connection), replace=True)
    if connection.execute(_HAS_TOTALS).first() is not None:  # revision 0011's kept totals
        fill_totals(driver_connection(connection))
    for sql in triggers:
        connection.exec_driver_sql(sql)


_HAS_BIGRAM_TABLE = text(
    f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{BIGRAM_TABLE}'"
)
_HAS_TOTALS = text(
    f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{MESSAGE_TOTAL_TABLE}'"
)

_LINK_PARENT = (
    update(sessions_table)
    .where(sessions_table.c.id == bindparam("p_id"))
    .values(parent_session_id=bindparam("p_parent"))
)
_MOVE_SEQUENCE = text(
    "UPDATE sqlite_sequence SET seq = :seq WHERE name = 'messages' AND seq < :seq"
)


def _flags(found: Salvage, written: list[dict[str, Any]]) -> Iterator[tuple[str, bool, bool]]:
    """(id, archived, pinned) of the written sessions the damaged file flagged; a flag that
    is not 0 or 1 (a damaged cell) counts as unset."""
    for row in written:
        salvaged = found.sessions.get(row["id"], {})
        archived, pinned = (salvaged.get(name) in (1, True) for name in KEEPING_COLUMNS)
        if archived or pinned:
            yield row["id"], archived, pinned


def _sessions_to_write(found: Salvage, report: RecoveryReport) -> list[dict[str, Any]]:
    """Salvaged sessions without parents, titles kept unique, and stand-ins for lost ones."""
    rows = []
    titles: set[str] = set()
    for row in sorted(found.sessions.values(), key=lambda r: (r["started_at"], r["id"])):
        row = {**row, "parent_session_id": None}
        title = row.get("title")
        if title is not None:
            if title in titles:
                report.notes.append(f"session {row['id']}: title {title!r} taken, left out")
                row["title"] = None
            titles.add(title)
        rows.append(row)
    first_seen: dict[str, float] = {}
    for message in found.messages.values():
        session_id = message["session_id"]
        if session_id not in found.sessions:
            stamp = float(message["timestamp"])
            first_seen[session_id] = min(stamp, first_seen.get(session_id, stamp))
    for session_id in sorted(first_seen):
        rows.append({"id": session_id, "source": "unknown", "started_at": first_seen[session_id]})
        report.sessions_rebuilt.append(session_id)
    return rows


def _insert_sessions(connection: Connection, rows: list[dict[str, Any]]) -> None:
    connection.execute(insert(writable_sessions(STANDARD)), rows)


def _insert_messages(connection: Connection, rows: list[dict[str, Any]]) -> None:
    insert_rows(connection, STANDARD, rows)


def _insert(
    store: Store,
    rows: list[dict[str, Any]],
    write: Callable[[Connection, list[dict[str, Any]]], None],
    what: str,
    report: RecoveryReport,
) -> list[dict[str, Any]]:
    """Write the rows in batches; a batch the file refuses is written row by row, each
    refused row left out with a note. Returns the rows written."""
    written: list[dict[str, Any]] = []
    for batch in _chunks(rows):
        try:
            with store.write() as uow:
                write(uow.connection, batch)
            written += batch
            continue
        except IntegrityError:
            pass
        for row in batch:
            try:
                with store.write() as uow:
                    write(uow.connection, [row])
            except IntegrityError as error:
                report.rows_refused += 1
                report.notes.append(f"{what} {row['id']} left out: {error.orig}")
                continue
            written.append(row)
    return written


def _chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), BATCH):
        yield rows[start : start + BATCH]


def _verify(path: Path, sessions: int, messages: int) -> None:
    connection = sqlite3.connect(path)
    try:
        problems = [row[0] for row in connection.execute("PRAGMA integrity_check")]
        counted = connection.execute(COUNT_ROWS).fetchone()
    finally:
        connection.close()
    if problems != ["ok"] or counted != (sessions, messages):
        raise RecoveryError(
            f"the recovered file failed its check ({'; '.join(problems[:3])}; "
            f"{counted[0]} sessions, {counted[1]} messages written of {sessions}, {messages})"
        )
