"""Every readable session and message of a damaged file, and what the file claims it had.

Rows are read the way the ``sqlite3`` shell's ``.recover`` reads them: first
down each b-tree from its root (the schema on page 1 names the roots), then
every page no tree reached and the freelist does not hold -- the leaves
under a damaged interior page -- where a row is recognised by its shape (the
columns of ``messages`` or ``sessions``, each of the right kind). A row found
both ways is taken from its tree. Freelist pages are never read: they hold
rows that were deleted, and a salvage must not bring those back.

Besides the rows, the damaged file's own claims are collected, so a report
can say what was lost: the sessions' ``message_count`` counters, the message
ids listed by ``idx_messages_session``, the session ids listed by the primary
key's index, and the rowid ranges of damaged pages of the ``messages`` tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Float, Integer, Table, Text

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories.shapes import storage_type
from hermes_store.schema.tables import messages_table, sessions_table
from hermes_store.tools.recovery.pages import (
    TABLE_LEAF,
    DamagedPage,
    PageFile,
    Unreadable,
    walk,
)

MESSAGES, SESSIONS = "messages", "sessions"
_MESSAGE_INDEX = "idx_messages_session"  # (session_id, timestamp) + rowid
_SESSION_KEY_INDEX = "sqlite_autoindex_sessions_1"  # (id) + rowid


@dataclass
class TreeReport:
    """One table or index of the damaged file: how much of it could be read."""

    name: str
    kind: str  # "table" or "index"
    pages: int
    damaged_pages: list[int]
    readable: int
    """Rows (tables) or entries (indexes) read from the tree, orphan pages not counted."""
    unreadable: int
    """Cells that did not parse, or whose record did not fit the table."""

    @property
    def damaged(self) -> bool:
        return bool(self.damaged_pages) or self.unreadable > 0


@dataclass
class Salvage:
    """What :func:`salvage` found; rows keyed by their ids, as the model's columns."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)
    trees: list[TreeReport] = field(default_factory=list)
    header_valid: bool = True
    schema_complete: bool = True
    freelist_complete: bool = True
    orphan_pages: int = 0
    """Pages that no tree reached and that parse as b-tree pages (under a damaged parent)."""
    orphan_rows: int = 0
    """Rows taken from those pages (they were not reachable through SQL)."""
    conflicting_rows: int = 0
    """Orphan rows whose id was already read from a tree or another orphan page (skipped)."""
    dropped_columns: list[str] = field(default_factory=list)
    """Columns of the damaged file that the head schema does not have."""
    indexed_message_ids: dict[int, str] = field(default_factory=dict)
    """Message id -> session id, as the file's ``idx_messages_session`` lists them."""
    indexed_session_ids: set[str] = field(default_factory=set)
    message_damage: list[DamagedPage] = field(default_factory=list)
    """Damaged pages of the ``messages`` tree, with the id ranges they held when known."""
    sequence: int | None = None
    """``sqlite_sequence`` for messages: the largest id ever handed out."""

    @property
    def claimed_session_ids(self) -> set[str]:
        """Every session id the file knows of: its rows, its key index, its messages."""
        return (
            set(self.sessions)
            | self.indexed_session_ids
            | set(self.indexed_message_ids.values())
            | {row["session_id"] for row in self.messages.values()}
        )

    @property
    def counted_messages(self) -> int:
        """What the salvaged sessions' own ``message_count`` counters add up to."""
        return sum(int(row.get("message_count") or 0) for row in self.sessions.values())


class _Shape:
    """The columns of one table as the damaged file stores them, and how to check a row."""

    def __init__(self, model: Table, columns: list[str], rowid_alias: str | None) -> None:
        self.columns = columns
        self.rowid_alias = rowid_alias
        self.kinds: list[tuple[str, str | None, bool]] = []  # (name, kind, required)
        for name in columns:
            column = model.c.get(name)
            if column is None:
                self.kinds.append((name, None, False))
                continue
            stored = storage_type(column.type)  # a JSON column is TEXT in the file
            if isinstance(stored, Text):
                kind = "text"
            elif isinstance(stored, Integer | Float):
                kind = "number"
            else:
                kind = None
            required = not column.nullable or name == "id"
            self.kinds.append((name, kind, required))
        required_at = [index for index, (_n, _k, needed) in enumerate(self.kinds) if needed]
        self.least = (max(required_at) + 1) if required_at else 1
        self.known = {column.name for column in model.columns}

    def row(self, values: list[Any], rowid: int | None) -> dict[str, Any] | None:
        """The row as the model's columns, or None when the values cannot be this table's."""
        if not self.least <= len(values) <= len(self.columns):
            return None
        values = values + [None] * (len(self.columns) - len(values))
        row: dict[str, Any] = {}
        for (name, kind, required), value in zip(self.kinds, values, strict=True):
            if name == self.rowid_alias:
                if value is not None and value != rowid:
                    return None
                if rowid is None or rowid < 1:
                    return None
                value = rowid
            elif value is None:
                if required:
                    return None
            elif kind == "text":
                if not isinstance(value, str) or (required and not value):
                    return None
            elif kind == "number" and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                return None
            if name in self.known:
                row[name] = value
        return row


def _columns(sql: str | None, fallback: Table) -> list[str]:
    """Column names in file order, from the table's CREATE statement (or the model's)."""
    if sql:
        scratch = sqlite3.connect(":memory:")
        try:
            scratch.execute(sql)
            name = sql.split("(", 1)[0].split()[-1].strip("\"'`[]")
            columns = [row[1] for row in scratch.execute(f'PRAGMA table_info("{name}")')]
            if columns:
                return columns
        except sqlite3.Error:
            pass
        finally:
            scratch.close()
    return [column.name for column in fallback.columns]


@dataclass
class _SchemaEntry:
    type: str
    name: str
    rootpage: int
    sql: str | None


def _schema(pages: PageFile) -> tuple[list[_SchemaEntry], TreeReport, set[int]]:
    """``sqlite_schema``, read from page 1's tree: its entries, its report, its pages."""
    tree = walk(pages, 1)
    entries = []
    unreadable = 0
    for leaf in tree.leaves:
        page = pages.btree(leaf)
        if page is None or page.kind != TABLE_LEAF:
            unreadable += 1
            continue
        for cell in pages.cells(page):
            values = None if isinstance(cell, Unreadable) else _decode(pages, cell.payload)
            if values is None or len(values) != 5 or not isinstance(values[1], str):
                unreadable += 1
                continue
            kind, name, _table, root, sql = values
            if isinstance(root, int) and root > 0:
                entries.append(_SchemaEntry(str(kind), name, root, sql))
    report = TreeReport(
        name="sqlite_schema",
        kind="table",
        pages=len(tree.pages) + len(tree.damaged),
        damaged_pages=sorted(page.number for page in tree.damaged),
        readable=len(entries),
        unreadable=unreadable,
    )
    return entries, report, tree.pages


def _decode(pages: PageFile, payload: bytes | None) -> list[Any] | None:
    return None if payload is None else pages.decode(payload)


def salvage(path: Path) -> Salvage:
    """Read every session and message that can be read from the database file ``path``."""
    found = Salvage()
    with PageFile(path) as pages:
        found.header_valid = pages.header.valid
        entries, schema_tree, owned = _schema(pages)
        found.schema_complete = not schema_tree.damaged
        found.trees.append(schema_tree)
        sql = {entry.name: entry.sql for entry in entries if entry.type == "table"}
        shapes = {
            MESSAGES: _Shape(messages_table, _columns(sql.get(MESSAGES), messages_table), "id"),
            SESSIONS: _Shape(sessions_table, _columns(sql.get(SESSIONS), sessions_table), None),
        }
        found.dropped_columns = sorted(
            f"{table}.{name}"
            for table, shape in shapes.items()
            for name in shape.columns
            if name not in shape.known
        )
        freelist, found.freelist_complete = pages.freelist()
        owned |= freelist
        for entry in entries:
            owned |= _read_tree(pages, entry, shapes, found)
        _read_orphans(pages, owned, shapes, found)
    return found


def _read_tree(
    pages: PageFile, entry: _SchemaEntry, shapes: dict[str, _Shape], found: Salvage
) -> set[int]:
    """Walk one tree, keep its rows if it is one of ours; returns the pages it owns."""
    tree = walk(pages, entry.rootpage)
    readable = unreadable = 0
    shape = shapes.get(entry.name) if entry.type == "table" else None
    for number in tree.leaves + tree.interior:
        page = pages.btree(number)
        assert page is not None
        if page.table and not page.leaf:
            continue  # table interior cells hold keys, not rows
        for cell in pages.cells(page):
            if isinstance(cell, Unreadable) or cell.payload is None:
                unreadable += 1
                continue
            if not _take(pages, entry, shape, cell.rowid, cell.payload, found):
                unreadable += 1
                continue
            readable += 1
    if entry.name == MESSAGES:
        found.message_damage = tree.damaged
    found.trees.append(
        TreeReport(
            name=entry.name,
            kind="table" if entry.type == "table" else "index",
            pages=len(tree.pages) + len(tree.damaged),
            damaged_pages=sorted(page.number for page in tree.damaged),
            readable=readable,
            unreadable=unreadable,
        )
    )
    return tree.pages


def _take(
    pages: PageFile,
    entry: _SchemaEntry,
    shape: _Shape | None,
    rowid: int | None,
    payload: bytes,
    found: Salvage,
) -> bool:
    """Keep what one readable cell says; False when its record does not parse or fit."""
    if shape is None and entry.name not in (_MESSAGE_INDEX, _SESSION_KEY_INDEX, "sqlite_sequence"):
        return True  # a tree we only count: its cell parsed, which is all we ask
    values = pages.decode(payload)
    if values is None:
        return False
    if shape is not None:
        row = shape.row(values, rowid)
        if row is None:
            return False
        _keep(found, entry.name, row, orphan=False)
    elif entry.name == _MESSAGE_INDEX and len(values) == 3 and isinstance(values[2], int):
        found.indexed_message_ids[values[2]] = str(values[0])
    elif entry.name == _SESSION_KEY_INDEX and len(values) == 2 and isinstance(values[0], str):
        found.indexed_session_ids.add(values[0])
    elif entry.name == "sqlite_sequence" and values[:1] == [MESSAGES] and len(values) == 2:
        found.sequence = values[1] if isinstance(values[1], int) else None
    return True


def _keep(found: Salvage, table: str, row: dict[str, Any], *, orphan: bool) -> bool:
    """Add a row unless its id is taken; rows from trees come first, so they win."""
    rows: dict[Any, dict[str, Any]] = found.messages if table == MESSAGES else found.sessions
    key = row["id"]
    if key in rows:
        if orphan:
            found.conflicting_rows += 1
        return False
    rows[key] = row
    return True


def _read_orphans(
    pages: PageFile, owned: set[int], shapes: dict[str, _Shape], found: Salvage
) -> None:
    """Table leaves no tree reached: rows recognised by shape (messages before sessions)."""
    for number in pages.data_pages():
        if number in owned:
            continue
        page = pages.btree(number)
        if page is None:
            continue
        found.orphan_pages += 1
        if page.kind != TABLE_LEAF:
            continue
        for cell in pages.cells(page):
            if isinstance(cell, Unreadable) or cell.payload is None:
                continue
            values = pages.decode(cell.payload)
            if values is None:
                continue
            for table in (MESSAGES, SESSIONS):
                row = shapes[table].row(values, cell.rowid)
                if row is not None:
                    if _keep(found, table, row, orphan=True):
                        found.orphan_rows += 1
                    break


def id_ranges(ids: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ids folded into inclusive (first, last) ranges."""
    ranges: list[tuple[int, int]] = []
    for value in sorted(set(ids)):
        if ranges and value == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], value)
        else:
            ranges.append((value, value))
    return ranges
