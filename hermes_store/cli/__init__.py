"""``hermes-store``: the store's operations from the command line, one command per verb.

Every command that works on a store takes ``--db PATH`` or ``--url URL``;
without either the store is ``$HERMES_STORE_URL``, else
``$HERMES_HOME/state.db``, else ``~/.hermes/state.db``. The dispatcher here
resolves those options once (:func:`.target.resolve`) and hands the command
its :class:`~.target.Target`. Only ``upgrade``, ``import`` and ``demo``
create a database that does not exist yet; every other command refuses a
missing file instead of leaving an empty ``state.db`` behind a typo.

Errors a user can cause (an unknown id, a missing file, a bad title, a
database locked past patience, a bad JSONL line) end in one red line on
stderr and exit status 1; usage errors are argparse's, exit status 2. The
grammar is :data:`COMMANDS`, assembled from the groups in :mod:`.commands`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO, Any

from sqlalchemy.exc import SQLAlchemyError

from hermes_store.cli.args import CliError, Command, UsageError, build_parser, named
from hermes_store.cli.commands import COMMANDS
from hermes_store.cli.output import fail
from hermes_store.cli.signals import StoppedBySignal, signals_unwind
from hermes_store.cli.target import resolve
from hermes_store.errors import StoreError
from hermes_store.schema.state import HEAD_REVISION, HEAD_SCHEMA_VERSION

__all__ = ["COMMANDS", "DESCRIPTION", "main"]

DESCRIPTION = "The Hermes agent's session store (state.db): inspect, search, export, maintain."


def _version() -> str:
    from importlib import metadata

    try:
        version = metadata.version("hermes-store")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "(not installed)"
    from hermes_store.backends.sqlite import library

    return (
        f"hermes-store {version} (schema version {HEAD_SCHEMA_VERSION}, revision {HEAD_REVISION})"
        f"\n{library.describe()}"
    )


# ----------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------
def _database_message(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    return f"database error: {original if original is not None else error}"


class _ReaderLeft(Exception):
    """stdout's reader closed the pipe (``hermes-store export | head``): nothing is wrong."""


class _PipeAwareStdout:
    """stdout, but a closed pipe raises :class:`_ReaderLeft` instead of ``BrokenPipeError``.

    A ``BrokenPipeError`` can surface anywhere a line is written, or at
    Python's own flush at exit (a traceback); a Unix tool whose reader left
    ends quietly, with status 141 (SIGPIPE) or 0. Everything else is the real
    stream's.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _ReaderLeft from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _ReaderLeft from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _run(argv: Sequence[str]) -> int:
    """Parse ``argv`` and run its command; the exit status (argparse exits itself on usage)."""
    parser = build_parser("hermes-store", DESCRIPTION, named(argv, COMMANDS), _version)
    if not argv:
        parser.print_help()
        return 2
    options = vars(parser.parse_args(argv))
    command: Command | None = options.pop("_command", None)
    subparser: argparse.ArgumentParser | None = options.pop("_parser", None)
    if command is None or subparser is None:  # options, no command
        parser.print_help()
        return 2
    try:
        target = resolve(options)  # the store's options, taken out and resolved once
        if target is not None:
            options["target"] = target
        return command.run(**options) or 0
    except UsageError as error:
        subparser.error(str(error))  # exits 2


def main(argv: Sequence[str] | None = None) -> None:
    """Console script ``hermes-store``: exits with the command's status (0: returns)."""
    real_stdout = sys.stdout
    # Not a TextIO: it hands what it does not override to the real stream. Older
    # typeshed types sys.stdout as a plain TextIO (an error there, unused here).
    sys.stdout = _PipeAwareStdout(real_stdout)  # type: ignore[assignment, unused-ignore]
    try:
        with signals_unwind():
            code = _run(sys.argv[1:] if argv is None else argv)
            sys.stdout.flush()
    except StoppedBySignal as stopped:
        fail(
            f"stopped by {stopped}: what was committed before stays, "
            "what was under way was rolled back"
        )
        code = stopped.exit_code
    except (CliError, StoreError) as error:
        fail(str(error))
        code = 1
    except SQLAlchemyError as error:
        fail(_database_message(error))
        code = 1
    except (_ReaderLeft, BrokenPipeError):
        # The rest of the output goes nowhere, including Python's flush at exit.
        if sys.__stdout__ is not None:  # None only without a console (pythonw)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        code = 141
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        fail(f"{error.strerror or error}{where}")
        code = 1
    except KeyboardInterrupt:
        fail("interrupted")
        code = 130
    finally:
        sys.stdout = real_stdout
    if code:
        sys.exit(code)
