"""A SQLite file read page by page, without SQLite: what salvage needs when b-trees break.

SQLite stops at the first damaged page it meets on a path through a b-tree;
everything below a broken interior page becomes unreachable to SQL although
its leaves are intact. The ``sqlite3`` shell's ``.recover`` gets past that by
reading pages itself, through the ``sqlite_dbpage`` table -- which Python's
``sqlite3`` (and Debian's shell) are built without. So this module reads the
file format directly (https://www.sqlite.org/fileformat2.html): the header,
b-tree pages and their cells, overflow chains, records, the freelist. It only
ever reads, through a read-only memory map, and every structure is checked
against the page bounds before it is trusted: a page that does not parse is
reported as damaged, never guessed at.

A hostile file must not make the reading slow: in a sound file every overflow
page belongs to one cell, so a page another cell's chain already took ends the
chain that meets it (a file whose cells all aim at one long chain is read in
time linear in its size, not quadratic), and a cell may not claim more overflow
pages than the file has left. :attr:`PageFile.reads` counts the pages read, the
step counter a test holds a salvage to.

The file must be a plain database file: a ``-wal`` is applied first (by
SQLite, on a scratch copy), so the pages here are the committed ones.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.file_header import is_database_header, page_size

TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR = 13, 5, 10, 2
_KINDS = {TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR}
_ENCODINGS = {1: "utf-8", 2: "utf-16-le", 3: "utf-16-be"}
_LOCK_BYTE_OFFSET = 0x40000000  # the page holding this offset is never used
_FIXED_SIZES = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}
_FLOAT = struct.Struct(">d")
MAX_PAYLOAD = 1_000_000_000
"""SQLite's default SQLITE_MAX_LENGTH: no record it wrote is longer."""


class Unreadable(Exception):
    """A structure on a page does not fit the page or the format."""


def varint(data: bytes, position: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``position``: (value, position after it)."""
    value = 0
    for index in range(8):
        if position + index >= len(data):
            raise Unreadable("varint past the end")
        byte = data[position + index]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, position + index + 1
    if position + 8 >= len(data):
        raise Unreadable("varint past the end")
    return (value << 8) | data[position + 8], position + 9


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class Header:
    """What the first 100 bytes say; ``valid`` is False when they are not a SQLite header."""

    valid: bool
    page_size: int
    usable: int
    page_count: int
    freelist_trunk: int
    freelist_count: int
    encoding: str
    autovacuum: bool


def read_header(first: bytes, file_size: int) -> Header:
    """The header, or a best guess (4096-byte pages, UTF-8) when page 1 is damaged."""
    if is_database_header(first):
        size = page_size(first)
        reserved = first[20]
        if size >= 512 and size & (size - 1) == 0 and reserved < size - 480:
            in_header = int.from_bytes(first[28:32], "big")
            counter_valid = first[24:28] == first[92:96]
            by_size = file_size // size
            pages = in_header if counter_valid and 0 < in_header <= by_size else by_size
            return Header(
                valid=True,
                page_size=size,
                usable=size - reserved,
                page_count=pages,
                freelist_trunk=int.from_bytes(first[32:36], "big"),
                freelist_count=int.from_bytes(first[36:40], "big"),
                encoding=_ENCODINGS.get(int.from_bytes(first[56:60], "big"), "utf-8"),
                autovacuum=int.from_bytes(first[52:56], "big") != 0,
            )
    return Header(False, 4096, 4096, file_size // 4096, 0, 0, "utf-8", False)


@dataclass
class Cell:
    """One cell: a row (``rowid`` set, table leaf) or an index entry, or a child pointer."""

    child: int | None = None
    rowid: int | None = None
    payload: bytes | None = None
    """The record's bytes; None when its overflow chain is broken."""


@dataclass
class BtreePage:
    number: int
    kind: int
    cell_offsets: list[int]
    right: int | None

    @property
    def leaf(self) -> bool:
        return self.kind in (TABLE_LEAF, INDEX_LEAF)

    @property
    def table(self) -> bool:
        return self.kind in (TABLE_LEAF, TABLE_INTERIOR)


@dataclass
class PageFile:
    """A database file opened read-only; pages are numbered from 1, as SQLite does."""

    path: Path
    header: Header = field(init=False)

    def __post_init__(self) -> None:
        self._handle = self.path.open("rb")
        size = self.path.stat().st_size
        self._map: mmap.mmap | bytes = (
            mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        )
        self.header = read_header(bytes(self._map[:100]), size)
        self.reads = 0
        """Pages read so far (header bytes not counted)."""
        self._claimed: set[int] = set()
        """Overflow pages some cell's chain already took: no other chain may take them."""

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._handle.close()

    def __enter__(self) -> PageFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- pages -------------------------------------------------------------
    def raw(self, number: int) -> bytes | None:
        """The bytes of page ``number``, or None when it is outside the file."""
        if not 1 <= number <= self.header.page_count:
            return None
        self.reads += 1
        start = (number - 1) * self.header.page_size
        data = self._map[start : start + self.header.page_size]
        return bytes(data) if len(data) == self.header.page_size else None

    def data_pages(self) -> Iterator[int]:
        """Every page that may hold b-tree content: not the lock-byte or pointer-map pages."""
        size = self.header.page_size
        lock_page = _LOCK_BYTE_OFFSET // size + 1
        ptrmap = self._ptrmap_pages()
        for number in range(2, self.header.page_count + 1):
            if number != lock_page and number not in ptrmap:
                yield number

    def _ptrmap_pages(self) -> set[int]:
        if not self.header.autovacuum:
            return set()
        step = self.header.usable // 5 + 1
        return set(range(2, self.header.page_count + 1, step))

    def freelist(self) -> tuple[set[int], bool]:
        """Pages on the freelist, and whether the whole list could be read."""
        pages: set[int] = set()
        trunk = self.header.freelist_trunk
        while trunk:
            data = self.raw(trunk)
            if data is None or trunk in pages:
                return pages, False
            pages.add(trunk)
            following = int.from_bytes(data[0:4], "big")
            count = int.from_bytes(data[4:8], "big")
            if count > (self.header.usable - 8) // 4:
                return pages, False
            for index in range(count):
                leaf = int.from_bytes(data[8 + 4 * index : 12 + 4 * index], "big")
                if not 2 <= leaf <= self.header.page_count:
                    return pages, False
                pages.add(leaf)
            trunk = following
        return pages, len(pages) == self.header.freelist_count

    # -- b-tree pages ----------------------------------------------------------
    def btree(self, number: int) -> BtreePage | None:
        """Page ``number`` as a b-tree page, or None when it is not a well-formed one."""
        data = self.raw(number)
        if data is None:
            return None
        usable = self.header.usable
        at = 100 if number == 1 else 0
        kind = data[at]
        if kind not in _KINDS:
            return None
        cells = int.from_bytes(data[at + 3 : at + 5], "big")
        content = int.from_bytes(data[at + 5 : at + 7], "big") or 65536
        header_size = 8 if kind in (TABLE_LEAF, INDEX_LEAF) else 12
        pointers_end = at + header_size + 2 * cells
        if pointers_end > content or content > usable or data[at + 7] > 60:
            return None
        offsets = [
            int.from_bytes(data[pointer : pointer + 2], "big")
            for pointer in range(at + header_size, pointers_end, 2)
        ]
        if any(not content <= offset < usable - 3 for offset in offsets):
            return None
        right = None
        if header_size == 12:
            right = int.from_bytes(data[at + 8 : at + 12], "big")
            if not 2 <= right <= self.header.page_count:
                return None
        return BtreePage(number, kind, offsets, right)

    def cells(self, page: BtreePage, *, payloads: bool = True) -> Iterator[Cell | Unreadable]:
        """The page's cells in order; a cell that does not parse comes as ``Unreadable``.

        ``payloads=False`` (a walk down a tree, which needs only the child
        pointers and keys) leaves every payload None and reads no overflow
        page, so a cell's chain is read once, by the pass that keeps its row.
        """
        data = self.raw(page.number)
        assert data is not None
        for offset in page.cell_offsets:
            try:
                yield self._cell(page, data, offset, payloads)
            except Unreadable as problem:
                yield problem

    def _cell(self, page: BtreePage, data: bytes, offset: int, payloads: bool) -> Cell:
        usable = self.header.usable
        data = data[:usable]
        if page.kind == TABLE_INTERIOR:
            pointer = int.from_bytes(data[offset : offset + 4], "big")
            key, _end = varint(data, offset + 4)
            self._check_child(pointer)
            return Cell(child=pointer, rowid=_signed64(key))
        position = offset
        child: int | None = None
        if page.kind == INDEX_INTERIOR:
            child = int.from_bytes(data[offset : offset + 4], "big")
            self._check_child(child)
            position += 4
        size, position = varint(data, position)
        rowid = None
        if page.kind == TABLE_LEAF:
            key, position = varint(data, position)
            rowid = _signed64(key)
        if size > MAX_PAYLOAD:
            raise Unreadable(f"a {size}-byte record is longer than SQLite writes")
        local = self._local_size(size, table=page.kind == TABLE_LEAF)
        if position + local > usable:
            raise Unreadable("cell runs past the page")
        if not payloads:
            return Cell(child=child, rowid=rowid)
        payload = data[position : position + local]
        if local < size:
            if position + local + 4 > usable:
                raise Unreadable("overflow pointer past the page")
            first = int.from_bytes(data[position + local : position + local + 4], "big")
            rest = self._overflow(first, size - local)
            return Cell(child=child, rowid=rowid, payload=None if rest is None else payload + rest)
        return Cell(child=child, rowid=rowid, payload=payload)

    def _check_child(self, child: int) -> None:
        if not 2 <= child <= self.header.page_count:
            raise Unreadable(f"child page {child} outside the file")

    def _local_size(self, size: int, *, table: bool) -> int:
        """How much of a ``size``-byte payload sits on the b-tree page (the format's rule)."""
        usable = self.header.usable
        most = usable - 35 if table else (usable - 12) * 64 // 255 - 23
        if size <= most:
            return size
        least = (usable - 12) * 32 // 255 - 23
        local = least + (size - least) % (usable - 4)
        return local if local <= most else least

    def _overflow(self, page: int, remaining: int) -> bytes | None:
        """The rest of a payload from its overflow chain; None if the chain is broken.

        The chain's pages are claimed whether it reads whole or not: a cell
        aimed into another cell's chain (a loop, a crafted file) stops at the
        first claimed page, so no overflow page is read twice. The budget: a
        cell may not need more overflow pages than the file has unclaimed.
        """
        room = self.header.usable - 4
        if -(-remaining // room) > self.header.page_count - len(self._claimed):
            return None
        parts: list[bytes] = []
        while remaining > 0:
            data = None if page in self._claimed else self.raw(page)
            if data is None or page < 2:
                return None
            self._claimed.add(page)
            take = min(remaining, room)
            parts.append(data[4 : 4 + take])
            remaining -= take
            page = int.from_bytes(data[0:4], "big")
        return b"".join(parts)

    def decode(self, payload: bytes) -> list[Any] | None:
        """A record's values, or None when its header and body do not agree."""
        return decode_record(payload, self.header.encoding)


def decode_record(payload: bytes, encoding: str = "utf-8") -> list[Any] | None:
    """The values of a record (https://www.sqlite.org/fileformat2.html#record_format)."""
    try:
        header_size, position = varint(payload, 0)
        if not position <= header_size <= len(payload):
            return None
        types = []
        while position < header_size:
            serial, position = varint(payload, position)
            types.append(serial)
        if position != header_size:
            return None
        values: list[Any] = []
        body = header_size
        for serial in types:
            if serial in _FIXED_SIZES:
                width = _FIXED_SIZES[serial]
                chunk = payload[body : body + width]
                if len(chunk) != width:
                    return None
                if serial == 0:
                    values.append(None)
                elif serial == 7:
                    values.append(_FLOAT.unpack(chunk)[0])
                elif serial in (8, 9):
                    values.append(serial - 8)
                else:
                    values.append(int.from_bytes(chunk, "big", signed=True))
                body += width
            elif serial >= 12:
                width = (serial - 12) // 2
                chunk = payload[body : body + width]
                if len(chunk) != width:
                    return None
                # Bad bytes in a text (bit rot, another program) cost the bytes, not the row.
                text = chunk.decode(encoding, errors="replace") if serial % 2 else None
                values.append(bytes(chunk) if text is None else text)
                body += width
            else:
                return None  # 10 and 11 are reserved
        return values if body == len(payload) else None
    except (Unreadable, UnicodeDecodeError):
        return None


@dataclass
class DamagedPage:
    """A page a tree points at that does not parse, with the rowids it covered if known."""

    number: int
    low: int | None = None
    high: int | None = None


@dataclass
class TreeWalk:
    """What a walk from a root reached."""

    leaves: list[int] = field(default_factory=list)
    interior: list[int] = field(default_factory=list)
    damaged: list[DamagedPage] = field(default_factory=list)

    @property
    def pages(self) -> set[int]:
        return set(self.leaves) | set(self.interior)


def walk(pages: PageFile, root: int, taken: Set[int] = frozenset()) -> TreeWalk:
    """Every page of the b-tree at ``root``, leaves in key order; damaged ones noted.

    For a table tree the parent's keys say which rowids a damaged child held
    (child ``i`` holds rowids above key ``i-1`` up to key ``i``), which is how
    a salvage report names the ranges it could not read. A page in ``taken``
    (another tree's) or met twice counts as damaged: in a sound file each page
    has one parent, and a page shared by pointers is read once at most.
    """
    result = TreeWalk()
    seen: set[int] = set()
    stack: list[tuple[int, int | None, int | None]] = [(root, None, None)]
    while stack:
        number, low, high = stack.pop()
        page = pages.btree(number) if number not in seen and number not in taken else None
        if page is None:
            result.damaged.append(DamagedPage(number, low, high))
            continue
        seen.add(number)
        if page.leaf:
            result.leaves.append(number)
            continue
        result.interior.append(number)
        children: list[tuple[int, int | None, int | None]] = []
        previous = low
        for cell in pages.cells(page, payloads=False):
            if isinstance(cell, Unreadable) or cell.child is None:
                continue  # the children it pointed at are found as orphans
            key = cell.rowid if page.table else None
            children.append((cell.child, previous if page.table else None, key))
            if key is not None:
                previous = key
        assert page.right is not None
        children.append((page.right, previous if page.table else None, high))
        stack.extend(reversed(children))
    return result
