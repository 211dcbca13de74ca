"""Where ``hermes-store`` writes: plain lines, colored only for a terminal, and rich on demand.

Most commands answer in a line or three; rich's console costs more to import
than ``current`` takes to read the file, so lines are written straight to
the stream, with a few ANSI styles when the stream is a terminal (or
``FORCE_COLOR`` asks for them, and ``NO_COLOR`` does not forbid them: the
conventions rich follows too). Tables, trees and progress bars still come
from rich: :func:`console` creates its console the first time one is printed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

PIPED_WIDTH = 160
"""Width of tables written to a pipe or file, where rich would otherwise assume 80 columns."""

_SGR = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "black": "30",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "magenta": "35",
    "cyan": "36",
    "on_yellow": "43",
}


_CONTROL_PICTURES = {
    **{code: 0x2400 + code for code in range(0x20) if chr(code) not in "\n\t"},
    0x7F: 0x2421,
    **{code: 0xFFFD for code in range(0x80, 0xA0)},
}


def printable(text: str) -> str:
    """``text`` with its control characters (newline and tab aside) shown as symbols.

    Titles are cleaned when set, but ids, message content, tool output and
    model names are stored as given; a terminal would obey an ESC or OSC
    sequence among them (clear the screen, retitle the window, forge lines),
    so what comes out of the store is made inert before it is printed.
    """
    return text.translate(_CONTROL_PICTURES)


def colored(stream: IO[str]) -> bool:
    """Whether ``stream`` takes ANSI styles: a terminal, or FORCE_COLOR, and never NO_COLOR."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def paint(text: str, style: str | None, stream: IO[str]) -> str:
    """``text`` in ``style`` (words of :data:`_SGR`, e.g. ``"bold red"``) on a colored stream."""
    if not style or not colored(stream):
        return text
    codes = ";".join(_SGR[word] for word in style.split())
    return f"\x1b[{codes}m{text}\x1b[0m"


def say(*parts: str | tuple[str, str | None], stderr: bool = False) -> None:
    """One line of plain parts and ``(text, style)`` parts, never wrapped, never markup."""
    stream = sys.stderr if stderr else sys.stdout
    line = "".join(
        part if isinstance(part, str) else paint(part[0], part[1], stream) for part in parts
    )
    stream.write(line + "\n")


def write_json(value: Any) -> None:
    """Machine output: plain JSON on stdout, never through rich (no wrapping, no markup)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str) -> None:
    """The one red line of a failed command, on stderr: whitespace folded, so it stays one."""
    say(("error: " + " ".join(message.split()), "bold red"), stderr=True)


def warn(message: str) -> None:
    say((f"warning: {message}", "yellow"), stderr=True)


_consoles: dict[bool, Console] = {}


def console(*, stderr: bool = False) -> Console:
    """rich's console for stdout (or stderr), created when a command first prints a table."""
    if stderr not in _consoles:
        from rich.console import Console

        made = Console(stderr=stderr, highlight=False)
        if not made.is_terminal and "COLUMNS" not in os.environ:
            made.width = PIPED_WIDTH
        _consoles[stderr] = made
    return _consoles[stderr]


def show(renderable: Any, *, soft_wrap: bool = False) -> None:
    """Print a rich renderable (a table, a tree, a styled text) on stdout."""
    console().print(renderable, soft_wrap=soft_wrap)


def progress_bar() -> Progress:
    """A bar on stderr for export and import, drawn for a terminal only."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    err = console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # a bar is for people; logs and pipes get the summary
    )


class _Render:
    """:mod:`.render` (rich tables, trees), imported when a command first renders one.

    ``current`` prints three lines and ``--json`` prints JSON: neither needs
    rich, whose import is a good part of a short command's start-up.
    """

    def __getattr__(self, name: str) -> Any:
        from importlib import import_module

        return getattr(import_module("hermes_store.cli.render"), name)


lazy_render = _Render()
"""Stands in for :mod:`.render` at run time; type checkers see the module itself."""
