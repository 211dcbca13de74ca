"""Every readable session and message of a damaged file, and what the file claims it had.

Rows are read the way the ``sqlite3`` shell's ``.recover`` reads them: first
down each b-tree from its root (the schema on page 1 names the roots), then
every page no tree reached and the freelist does not hold -- the leaves
under a damaged interior page -- where a row is recognised by its shape (the
columns of ``messages`` or ``sessions``, each of the right kind). A row found
both ways is taken from its tree. Freelist pages are never read: they hold
rows that were deleted, and a salvage must not bring those back.

The columns a row's fields stand for are not taken on trust from the file's
own ``CREATE TABLE`` text, which may be damaged too: a name of ours that the
text lost (``timestamq`` for ``timestamp``) is put back where the columns we
know, in their known order, leave a place for it; where a column we require is
still missing, rows are read in our own column order (the order of the
files this package builds). A row that fits no layout is counted unreadable
on its own; it never stops the salvage of the others.

Besides the rows, the damaged file's own claims are collected, so a report
can say what was lost: the sessions' ``message_count`` counters, the message
ids listed by ``idx_messages_session``, the session ids listed by the primary
key's index, and the rowid ranges of damaged pages of the ``messages`` tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from sqlalchemy import Float, Integer, Table, Text

from hermes_store.backends.layout import KEEPING_COLUMNS
from hermes_store.backends.shapes import storage_type
from hermes_store.backends.sqlite.library import driver as sqlite3
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
    renamed_columns: list[str] = field(default_factory=list)
    """``table.damaged -> ours``: names of ours the file's schema text had lost."""
    pages_read: int = 0
    """Pages the salvage read, counting a page each time it was read."""
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
    """The columns of one table as the damaged file stores them, and how to check a row.

    A row is taken only with every column the model requires, each of the
    right kind: what goes into the new file can then never break its NOT NULL
    constraints.
    """

    def __init__(
        self, model: Table, columns: list[str], rowid_alias: str | None, extra: tuple[str, ...]
    ) -> None:
        self.columns = columns
        self.rowid_alias = rowid_alias
        required_names = {c.name for c in model.columns if not c.nullable or c.name == "id"}
        self.complete = required_names <= set(columns)
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
        self.known = {column.name for column in model.columns} | set(extra)

    def row(self, values: list[Any], rowid: int | None) -> dict[str, Any] | None:
        """The row as the model's columns, or None when the values cannot be this table's."""
        if not self.complete or not self.least <= len(values) <= len(self.columns):
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


def _declared(sql: str | None) -> list[str] | None:
    """Column names in file order, as the table's CREATE statement says; None if it does not
    parse."""
    if not sql:
        return None
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute(sql)
        name = sql.split("(", 1)[0].split()[-1].strip("\"'`[]")
        return [row[1] for row in scratch.execute(f'PRAGMA table_info("{name}")')] or None
    except sqlite3.Error:
        return None
    finally:
        scratch.close()


_LIKENESS = 0.75
"""How alike a stranger's name must be to a lost name of ours to be taken for it
when the place holds other strangers too (``timestamq``/``timestamp``: 0.89)."""


def _reconcile(declared: list[str], model: Table) -> tuple[list[str], list[tuple[str, str]]]:
    """The declared columns with names of ours the text lost put back; and what was renamed.

    The columns of ours a file has keep our order (the agent's versions add
    theirs between or after them), so a name of ours missing from the text
    can only sit between the nearest names of ours that are there. Where that
    place holds as many strange names as names of ours are missing, they are
    taken in order; otherwise a strange name is taken for the lost one it
    closely resembles. Names of ours out of order leave the text as it is.
    """
    known = [column.name for column in model.columns]
    at = {name: index for index, name in enumerate(declared) if name in known}
    anchors = sorted(at.values())
    if [known.index(declared[index]) for index in anchors] != sorted(
        known.index(declared[index]) for index in anchors
    ):
        return declared, []
    columns = list(declared)
    renamed: list[tuple[str, str]] = []
    bounds = [-1, *anchors, len(declared)]
    for low, high in zip(bounds, bounds[1:], strict=False):
        first = known.index(declared[low]) + 1 if low >= 0 else 0
        last = known.index(declared[high]) if high < len(declared) else len(known)
        lost = known[first:last]
        strangers = list(range(low + 1, high))
        if not lost or not strangers:
            continue
        if len(lost) == len(strangers):
            pairs = list(zip(strangers, lost, strict=True))
        else:
            pairs = []
            for name in lost:
                free = [i for i in strangers if i not in {index for index, _ in pairs}]
                best = max(free, key=lambda i: _likeness(columns[i], name), default=None)
                if best is not None and _likeness(columns[best], name) >= _LIKENESS:
                    pairs.append((best, name))
        for index, name in pairs:
            renamed.append((columns[index], name))
            columns[index] = name
    return columns, renamed


def _likeness(one: str, other: str) -> float:
    return SequenceMatcher(None, one.lower(), other.lower()).ratio()


def _shapes(
    table: str, sql: str | None, model: Table, rowid_alias: str | None, found: Salvage
) -> list[_Shape]:
    """How a row of ``table`` may be laid out: the file's columns, and our own order when
    those lack a column we require (a file whose text is whole is read as it says: our
    earlier revisions placed some sessions columns differently)."""
    ours = [column.name for column in model.columns]
    extra = KEEPING_COLUMNS if model is sessions_table else ()
    declared = _declared(sql)
    if declared is None:
        return [_Shape(model, ours, rowid_alias, extra)]
    columns, renamed = _reconcile(declared, model)
    found.renamed_columns += [f"{table}.{damaged} -> {name}" for damaged, name in renamed]
    kept = set(ours) | set(extra)
    found.dropped_columns += [f"{table}.{name}" for name in columns if name not in kept]
    shapes = [_Shape(model, columns, rowid_alias, extra)]
    if not shapes[0].complete:  # a required name of ours is lost beyond recognition
        shapes.append(_Shape(model, ours, rowid_alias, extra))
    return shapes


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
            MESSAGES: _shapes(MESSAGES, sql.get(MESSAGES), messages_table, "id", found),
            SESSIONS: _shapes(SESSIONS, sql.get(SESSIONS), sessions_table, None, found),
        }
        found.dropped_columns.sort()
        for entry in entries:
            owned |= _read_tree(pages, entry, shapes, found, owned)
        freelist, found.freelist_complete = pages.freelist()
        owned |= freelist
        _read_orphans(pages, owned, shapes, found)
        found.pages_read = pages.reads
    return found


def _read_tree(
    pages: PageFile,
    entry: _SchemaEntry,
    shapes: dict[str, list[_Shape]],
    found: Salvage,
    taken: set[int],
) -> set[int]:
    """Walk one tree, keep its rows if it is one of ours; returns the pages it owns.

    Pages ``taken`` by the trees read before are not read again (a crafted
    schema may aim two entries at one tree).
    """
    tree = walk(pages, entry.rootpage, taken)
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
    shape: list[_Shape] | None,
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
        row = _fit(shape, values, rowid)
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


def _fit(shapes: list[_Shape], values: list[Any], rowid: int | None) -> dict[str, Any] | None:
    """The row in the first layout it fits, or None."""
    for shape in shapes:
        row = shape.row(values, rowid)
        if row is not None:
            return row
    return None


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
    pages: PageFile, owned: set[int], shapes: dict[str, list[_Shape]], found: Salvage
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
                row = _fit(shapes[table], values, cell.rowid)
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
