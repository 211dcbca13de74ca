"""Commands moving sessions between stores: ``import`` reads an export, ``copy`` a whole store."""

from __future__ import annotations

from pathlib import Path

from hermes_store.cli.args import CliError, Command, arg, file_path, positive_int
from hermes_store.cli.output import progress_bar, say, warn
from hermes_store.cli.target import STORE, Target, open_store, target_of


def import_(*, file: Path, target: Target) -> None:
    """Add the sessions of an export; a session id already in the store is skipped."""
    from hermes_store.cli.import_file import (
        BATCH_MESSAGES,
        BATCH_SESSIONS,
        ImportResult,
        Record,
        import_one,
        link_parents,
        records,
    )

    if not file.is_file():
        raise CliError(f"{'not a regular file' if file.exists() else 'no such file'}: {file}")
    # Check every line before writing anything: a bad line names itself, the store stays as it was.
    try:
        total = sum(1 for _ in records(file))
    except CliError as error:
        raise CliError(f"{file} {error}; nothing was imported") from None
    result = ImportResult()
    with open_store(target, create=True) as store, progress_bar() as progress:
        task = progress.add_task("importing", total=total)
        batch: list[Record] = []

        def flush() -> None:
            with store.write() as uow:
                for record in batch:
                    import_one(uow, record, result)
                link_parents(uow, result)
            progress.advance(task, len(batch))
            batch.clear()

        for record in records(file):
            batch.append(record)
            if (
                len(batch) >= BATCH_SESSIONS
                or sum(len(r.messages) for r in batch) >= BATCH_MESSAGES
            ):
                flush()
        if batch:
            flush()
    for warning in result.warnings[:10]:
        warn(warning)
    if len(result.warnings) > 10:
        warn(f"... and {len(result.warnings) - 10} more")
    if result.pending_parents:
        orphans = ", ".join(sorted(result.pending_parents)[:5])
        warn(
            f"{len(result.pending_parents)} session(s) imported without their "
            f"parent, which is neither in the file nor in the store: {orphans}"
        )
    say(
        f"imported {result.sessions} session(s), {result.messages} message(s) from {file}; "
        f"skipped {result.skipped} already present"
    )


def copy_(*, source: str, destination: str, batch_size: int) -> None:
    """Copy every session and message into another store (SQLite -> PostgreSQL); idempotent."""
    from hermes_store.cli.progress import ProgressLines
    from hermes_store.tools.copy import copy_store

    origin = target_of(None, source, None)
    if not origin.exists():
        raise CliError(f"no database at {origin.describe()} (--from)")
    goal = target_of(None, destination, None)
    # Lines, not a bar: a long copy is often run with stderr to a log (progress.py).
    progressed = ProgressLines("copying")
    report = copy_store(origin.url, goal.url, batch_size=batch_size, progress=progressed)
    if report.dangling_parents:
        names = ", ".join(report.dangling_parents[:5])
        warn(
            f"{len(report.dangling_parents)} session(s) name a parent that is not "
            f"in the source and were copied without it: {names}"
        )
    there_already = (
        " (the rest were there already)"
        if (report.sessions_copied, report.messages_copied)
        != (report.sessions_total, report.messages_total)
        else ""
    )
    say(
        f"copied {report.sessions_copied} of {report.sessions_total} session(s) and "
        f"{report.messages_copied} of {report.messages_total} message(s) to "
        f"{goal.describe()}{there_already}; verified: every session "
        "is there with the same number of messages"
    )


COMMANDS = (
    Command(
        "import",
        import_,
        (
            arg("file", type=file_path, metavar="FILE", help="JSONL file written by 'export'."),
            *STORE,
        ),
    ),
    Command(
        "copy",
        copy_,
        (
            arg(
                "--from",
                dest="source",
                required=True,
                metavar="STORE",
                help="Store to copy: a SQLite path or URL.",
            ),
            arg(
                "--to",
                dest="destination",
                required=True,
                metavar="STORE",
                help="Store to copy into, e.g. postgresql+psycopg://user@host/db "
                "(created if empty).",
            ),
            arg(
                "--batch-size",
                type=positive_int,
                default=20_000,
                metavar="N",
                help="Rows per transaction (default 20,000).",
            ),
        ),
    ),
)
"""The commands moving sessions between stores, in the help's order."""
