"""Plain-text tables for ``sessions`` and ``search``: rich's look, without importing rich.

These two listings are what people run most, and start-up is most of what
they wait for (issue #19: within 1.5x of ``import sqlalchemy``); rich's
import and layout took a large share of that budget. A table here is drawn in
rich's default box (heavy head), fitted to the terminal's width (160 columns
into a pipe), its cells word-wrapped, a word longer than its column folded,
CJK characters counted two columns wide. Cells are lists of ``(text,
style)`` spans, painted by :func:`.output.paint` only on a colored
stream, so user data is never read as markup. A session id is never wrapped or
cut (people copy it): a terminal too narrow for every column loses the least
needed ones instead.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from hermes_store.cli.output import PIPED_WIDTH, colored, paint, printable

Span = tuple[str, str | None]
Cell = list[Span]

MATCH_OPEN = ">>>"
MATCH_CLOSE = "<<<"
MATCH_STYLE = "bold black on_yellow"
ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "tool": "bold magenta"}
NONE = "—"
FLEXIBLE_LEAST = 24
"""Columns a preview or snippet keeps before other columns leave the table for it."""


# ----------------------------------------------------------------------
# small formatters (also rich's tables', in render.py)
# ----------------------------------------------------------------------
def when(timestamp: float | None) -> str:
    """A Unix epoch float as local ``YYYY-MM-DD HH:MM``; a dash when unknown."""
    if timestamp is None:
        return NONE
    try:
        return datetime.fromtimestamp(float(timestamp)).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError, TypeError):
        return str(timestamp)


def number(value: int | float | None) -> str:
    return NONE if value is None else f"{int(value):,}"


def cost(value: float | None) -> str:
    return NONE if value is None else f"${float(value):,.4f}"


def one_line(text: str | None) -> str:
    """Whitespace (newlines included) folded to single spaces."""
    return " ".join((text or "").split())


def snippet_spans(snippet: str | None) -> Cell:
    """An FTS5 snippet with its ``>>>match<<<`` markers turned into highlighted spans."""
    spans: Cell = []
    rest = printable(one_line(snippet))
    while rest:
        start = rest.find(MATCH_OPEN)
        end = rest.find(MATCH_CLOSE, start + len(MATCH_OPEN)) if start >= 0 else -1
        if end < 0:  # no marker, or an unclosed one: the text as it is
            spans.append((rest, None))
            break
        spans.append((rest[:start], None))
        spans.append((rest[start + len(MATCH_OPEN) : end], MATCH_STYLE))
        rest = rest[end + len(MATCH_CLOSE) :]
    return [span for span in spans if span[0]]


# ----------------------------------------------------------------------
# layout
# ----------------------------------------------------------------------
def _width(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _text_width(text: str) -> int:
    return len(text) if text.isascii() else sum(_width(char) for char in text)


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False
    wrap: bool = True
    """False: the column keeps its width (a date); True: its cells wrap at words."""
    flexible: bool = False
    """The column that gives way first when the table is too wide (a preview, a snippet)."""
    drop: int = 0
    """When even the narrowest layout is too wide, columns leave highest ``drop`` first
    (0: never). A session id is never wrapped -- it is what people copy -- so a narrow
    terminal shows fewer columns instead."""


Line = list[tuple[str, str | None]]
"""A cell's line: ``(character run, style)`` pieces."""


def _wrap(cell: Cell, width: int) -> list[Line]:
    """``cell`` in lines of at most ``width`` columns: at spaces, folding longer words."""
    if sum(_text_width(text) for text, _ in cell) <= width:
        return [[span for span in cell if span[0]]]  # fits: one line as it is (most cells)
    chars = [(char, style) for text, style in cell for char in text]
    words: list[list[tuple[str, str | None]]] = [[]]
    for char, style in chars:
        if char == " ":
            words.append([])
        else:
            words[-1].append((char, style))
    lines: list[list[tuple[str, str | None]]] = [[]]
    used = 0
    for word in (w for w in words if w):
        size = sum(_width(char) for char, _ in word)
        gap = 1 if lines[-1] else 0
        if used + gap + size <= width:
            if gap:
                lines[-1].append((" ", None))
            lines[-1].extend(word)
            used += gap + size
            continue
        if lines[-1]:
            lines.append([])
            used = 0
        for char, style in word:  # fold what does not fit on a line of its own
            if used + _width(char) > width and lines[-1]:
                lines.append([])
                used = 0
            lines[-1].append((char, style))
            used += _width(char)
    return [_runs(line) for line in lines]


def _runs(chars: list[tuple[str, str | None]]) -> Line:
    runs: Line = []
    for char, style in chars:
        if runs and runs[-1][1] == style:
            runs[-1] = (runs[-1][0] + char, style)
        else:
            runs.append((char, style))
    return runs


def _kept(columns: Sequence[Column], least: list[int], room: int) -> list[int]:
    """Indexes of the columns shown: those whose narrowest layout fits ``room``."""
    kept = list(range(len(columns)))
    leaving = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop)
    while sum(least[i] for i in kept) + 3 * len(kept) + 1 > room and leaving:
        kept.remove(leaving.pop(0))
    return kept


def _fit(columns: Sequence[Column], natural: list[int], least: list[int], room: int) -> list[int]:
    """Column widths within ``room``: the flexible column gives way first, then the widest."""
    widths = list(natural)
    overhead = 3 * len(columns) + 1  # "│ " before each column, " │" after the last
    while sum(widths) + overhead > room:
        shrinkable = [i for i, column in enumerate(columns) if column.wrap and widths[i] > least[i]]
        if not shrinkable:
            break
        flexible = [i for i in shrinkable if columns[i].flexible]
        pick = flexible[0] if flexible else max(shrinkable, key=lambda i: widths[i])
        widths[pick] -= 1
    return widths


def _room(stream: IO[str]) -> int:
    if "COLUMNS" in os.environ or (getattr(stream, "isatty", None) and stream.isatty()):
        return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    return PIPED_WIDTH


def render(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], stream: IO[str]
) -> str:
    """The table as text for ``stream`` (styled only if the stream is colored)."""
    color = colored(stream)
    natural = [
        max([_text_width(column.header)] + [sum(_text_width(t) for t, _ in row[i]) for row in rows])
        for i, column in enumerate(columns)
    ]
    # A wrapping column keeps room for its header (or 8 columns), the flexible one for a
    # readable line (FLEXIBLE_LEAST); the others, their text.
    least = [
        min(max(len(column.header), FLEXIBLE_LEAST if column.flexible else 8), natural[i])
        if column.wrap
        else natural[i]
        for i, column in enumerate(columns)
    ]
    room = _room(stream)
    kept = _kept(columns, least, room)
    columns = [columns[i] for i in kept]
    rows = [[row[i] for i in kept] for row in rows]
    widths = _fit(columns, [natural[i] for i in kept], [least[i] for i in kept], room)

    def bar(left: str, fill: str, cross: str, right: str) -> str:
        return left + cross.join(fill * (w + 2) for w in widths) + right

    def paint_line(line: Line) -> str:
        return "".join(paint(text, style, stream) if color else text for text, style in line)

    def row_lines(cells: Sequence[Cell], edge: str, style: str | None) -> list[str]:
        wrapped: list[list[Line]] = [
            _wrap([(text, s or style) for text, s in cell], widths[i]) if cell else [[]]
            for i, cell in enumerate(cells)
        ]
        out = []
        for n in range(max(len(lines) for lines in wrapped)):
            parts = []
            for i, lines in enumerate(wrapped):
                line = lines[n] if n < len(lines) else []
                pad = " " * (widths[i] - sum(_text_width(t) for t, _ in line))
                text = paint_line(line)
                parts.append(pad + text if columns[i].right else text + pad)
            out.append(edge + " " + f" {edge} ".join(parts) + " " + edge)
        return out

    lines = [paint(title, "italic", stream) if color else title]
    lines.append(bar("┏", "━", "┳", "┓"))
    lines += row_lines([[(c.header, None)] for c in columns], "┃", "bold")
    lines.append(bar("┡", "━", "╇", "┩"))
    for row in rows:
        lines += row_lines(row, "│", None)
    lines.append(bar("└", "─", "┴", "┘"))
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------
# the two listings
# ----------------------------------------------------------------------
def _plain(text: Any, style: str | None = None) -> Cell:
    return [(printable(str(text)), style)] if text not in (None, "") else []


def sessions_table(rows: Sequence[Mapping[str, Any]], stream: IO[str]) -> str:
    columns = (
        Column("id", wrap=False),
        Column("title", drop=1),
        Column("source", drop=2),
        Column("model", drop=3),
        Column("preview", flexible=True, drop=4),
        Column("last active", wrap=False),
        Column("messages", right=True, wrap=False),
    )
    cells = [
        [
            _plain(row["id"], "bold"),
            _plain(row.get("title")),
            _plain(row.get("source")),
            _plain(row.get("model")),
            _plain(one_line(row.get("preview"))),
            _plain(when(row.get("last_active"))),
            _plain(number(row.get("message_count"))),
        ]
        for row in rows
    ]
    return render(f"{len(rows)} session(s), newest first", columns, cells, stream)


def search_table(
    hits: Sequence[Mapping[str, Any]], query: str, offset: int, stream: IO[str]
) -> str:
    first, last = offset + 1, offset + len(hits)
    title = f"{len(hits)} hit(s) for {query!r}" + (f", #{first}–#{last}" if offset else "")
    columns = (
        Column("session", wrap=False),
        Column("role", drop=1),
        Column("source", drop=3),
        Column("when", wrap=False, drop=2),
        Column("snippet", flexible=True),
    )
    cells = [
        [
            _plain(hit["session_id"], "bold"),
            _plain(hit.get("role") or "?", ROLE_STYLES.get(hit.get("role") or "", "bold")),
            _plain(hit.get("source")),
            _plain(when(hit.get("timestamp"))),
            snippet_spans(hit.get("snippet")),
        ]
        for hit in hits
    ]
    return render(title, columns, cells, stream)
