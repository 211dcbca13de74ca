"""The command line's grammar: each command's options as data, read by argparse.

``hermes-store`` parses with the standard library: typer (and click under it)
cost more to import than the whole budget a short command has to start
(issue #19: within 1.5x of ``import sqlalchemy``). A command is a function
that takes its options as keyword arguments; :class:`Command` names it, says
what it does in one line (the help's command list) and lists its
:class:`Arg` s. Usage errors -- a missing or malformed option, or options
that do not go together (:class:`UsageError`) -- end with argparse's usage
line and exit status 2, as they did under click.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn


class CliError(Exception):
    """A user mistake the command explains in one line (exit status 1)."""


class UsageError(Exception):
    """Options that parse but do not go together (exit status 2, with the command's usage)."""


def _number(kind: type[int] | type[float], least: float) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is not >= {least:g}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


non_negative_int = _number(int, 0)
"""A whole number, zero or more (--limit, --offset, --top)."""
positive_int = _number(int, 1)
"""A whole number, one or more (--keep, --batch-size)."""
non_negative_float = _number(float, 0)
"""A number of seconds or days, zero or more (--patience, --older-than)."""


def file_path(text: str) -> Path:
    """A path that may not exist yet, but is not a directory."""
    if not text:  # Path("") is the current folder, which the next test would name
        raise argparse.ArgumentTypeError("an empty path names no file")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory")
    return path


def store_url(text: str) -> str:
    """``--url``'s value: a URL with its scheme. The library reads a bare word as a file
    path; taken so here, a typo (``--url notaurl``) would create a store by that name."""
    if "://" not in text:
        raise argparse.ArgumentTypeError(
            "takes a URL with its scheme (postgresql://USER@HOST/DB, sqlite:////PATH); "
            "for a file give --db PATH"
        )
    return text


def directory_path(text: str) -> Path:
    """A path that may not exist yet, but is not a file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file")
    return path


@dataclass(frozen=True)
class Arg:
    """One option or positional argument: its names and ``add_argument``'s keywords."""

    names: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def arg(*names: str, **options: Any) -> Arg:
    return Arg(names, options)


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, the function run with the parsed options, its arguments.

    ``run`` returns the exit status, or None for 0.
    """

    name: str
    run: Callable[..., int | None]
    args: Sequence[Arg]

    @property
    def summary(self) -> str:
        """The first paragraph of the function's docstring, on one line."""
        doc = (self.run.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    @property
    def description(self) -> str:
        return " ".join((self.run.__doc__ or "").split()) if self.run.__doc__ else ""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, with ``[default: X]`` after an option whose default says something."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and not any(default is nothing for nothing in (None, False, True, argparse.SUPPRESS))
            and "[default:" not in text
        ):
            text += f" [default: {default}]"
        return text


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked (importlib.metadata is slow)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        self.describe: Callable[[], str] = kwargs.pop("describe")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        sys.stdout.write(self.describe() + "\n")
        sys.stdout.flush()
        parser.exit()


def named(argv: Sequence[str], commands: Sequence[Command]) -> Sequence[Command]:
    """Only the command ``argv`` starts with, when it names one; else every command.

    argparse builds each sub-parser's arguments when it is added: ten
    milliseconds for all of them, spent at every start to run one. The
    named command's parser alone reads and reports the same (its usage is
    ``hermes-store NAME ...`` either way); anything else -- no command,
    ``--help``, a typo -- gets them all, to list them.
    """
    chosen = [command for command in commands if argv and command.name == argv[0]]
    return chosen or commands


def build_parser(
    prog: str, description: str, commands: Sequence[Command], version: Callable[[], str]
) -> argparse.ArgumentParser:
    """The parser of ``commands``; each sub-parser's ``_command`` default is its command."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, allow_abbrev=False, formatter_class=_HelpFormatter
    )
    parser.add_argument(
        "--version", action=_Version, describe=version, help="Print the version and exit."
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in commands:
        sub = subparsers.add_parser(
            command.name,
            help=command.summary,
            description=command.description,
            allow_abbrev=False,
            formatter_class=_HelpFormatter,
        )
        for spec in command.args:
            sub.add_argument(*spec.names, **spec.options)
        sub.set_defaults(_command=command, _parser=sub)
    return parser
