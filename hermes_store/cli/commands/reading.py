"""Commands that only read: ``sessions``, ``show``, ``lineage``, ``search``, ``stats``, ``export``.

Each opens the store read-only (never created, migrated or tightened) and may
be answered by the replica its target names.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hermes_store.cli.args import CliError, Command, UsageError, arg, file_path, non_negative_int
from hermes_store.cli.output import console, progress_bar, say, show, write_json
from hermes_store.cli.table import search_table, sessions_table
from hermes_store.cli.target import (
    JSON,
    OFFSET,
    READING,
    SESSION_ID,
    Target,
    reader,
    repeatable,
    source_option,
)
from hermes_store.errors import SessionNotFoundError

if TYPE_CHECKING:
    from hermes_store.cli import render
else:
    from hermes_store.cli.output import lazy_render as render


def sessions(
    *,
    source: str | None,
    exclude_source: list[str] | None,
    limit: int,
    offset: int,
    include_children: bool,
    tips: bool,
    everything: bool,
    archived: bool,
    pinned: bool,
    target: Target,
    as_json: bool,
) -> None:
    """Recent conversations, newest first, with a preview of the first user message.

    Archived ones are left out unless --all (with them) or --archived (only
    them); --pinned lists the pinned ones alone.
    """
    if sum((everything, archived, pinned)) > 1:
        raise UsageError("give one of --all, --archived and --pinned")
    with reader(target) as sdb, sdb.store.read() as uow:
        rows = uow.sessions.listing(
            source=source,
            exclude_sources=exclude_source,
            limit=0 if pinned else limit,
            offset=0 if pinned else offset,
            include_children=include_children,
            project_compression_tips=tips,
            include_archived=everything or pinned,
            include_pinned=pinned,
            archived_only=archived,
        )
    if as_json:
        write_json(rows)
    elif rows:
        sys.stdout.write(sessions_table(rows, sys.stdout))
    else:
        say("no sessions" + (f" of source {source!r}" if source else ""))


def show_(
    *,
    session_id: str,
    target: Target,
    as_json: bool,
) -> None:
    """A session and all its messages."""
    with reader(target) as sdb:
        exported = sdb.export_session(session_id)
    if exported is None:
        raise SessionNotFoundError(session_id)
    if as_json:
        write_json(exported)
    else:
        render.print_session(console(), exported)


def lineage(
    *,
    session_id: str,
    target: Target,
    as_json: bool,
) -> None:
    """The sessions a session was split from, and those split off it, as a tree."""
    with reader(target) as sdb:
        ancestors = sdb.get_ancestors(session_id)
        descendants = sdb.get_descendants(session_id) if ancestors else []
    if not ancestors:
        raise SessionNotFoundError(session_id)
    if as_json:
        write_json(
            {
                "session": ancestors[0],
                "ancestors": ancestors[1:],
                "descendants": [row for row in descendants if row["id"] != session_id],
            }
        )
    else:
        show(render.lineage_tree(session_id, ancestors, descendants))


def search(
    *,
    query: str,
    source: list[str] | None,
    exclude_source: list[str] | None,
    role: list[str] | None,
    limit: int,
    offset: int,
    target: Target,
    as_json: bool,
) -> None:
    """Full-text search across every session's messages, best match first."""
    with reader(target) as sdb:
        hits = sdb.search_messages(
            query,
            source_filter=source or None,
            exclude_sources=exclude_source or None,
            role_filter=role or None,
            limit=limit,
            offset=offset,
        )
    if as_json:
        write_json(hits)
    elif hits:
        sys.stdout.write(search_table(hits, query, offset, sys.stdout))
    else:
        say(f"no matches for {query!r}")


def stats(
    *,
    top: int,
    target: Target,
    as_json: bool,
) -> None:
    """Token totals and cost by model, and the sessions that used the most tokens."""
    with reader(target) as sdb:
        result: dict[str, Any] = {
            "sessions": sdb.session_count(),
            "messages": sdb.message_count(),
            "by_model": sdb.token_usage_by_model(),
            # A session that used no tokens is not among the top ones, however few used any.
            "top_sessions": [
                row for row in sdb.top_sessions_by_tokens(top) if row.get("total_tokens")
            ],
        }
    if as_json:
        write_json(result)
        return
    say(f"{result['sessions']:,} session(s), {result['messages']:,} message(s)")
    show(render.usage_table(result["by_model"]))
    show(render.top_sessions_table(result["top_sessions"], console().width))


@contextmanager
def _private_output(path: Path) -> Iterator[IO[str]]:
    """Write ``path`` whole or not at all, readable by the owner only (it holds conversations)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _jsonl(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"


def export(
    *,
    session_id: str | None,
    output: Path | None,
    source: str | None,
    target: Target,
) -> None:
    """Write sessions with their messages as JSON lines, one session per line."""
    if session_id is not None and source is not None:
        raise UsageError("--source filters an export of all sessions; not with an ID")
    out_file = None if output is None or str(output) == "-" else output  # None: stdout
    to_stdout = out_file is None
    if out_file is not None and not out_file.parent.is_dir():
        raise CliError(f"no such directory: {out_file.parent}")
    if out_file is not None and out_file.exists() and not out_file.is_file():
        # The export lands by renaming over ``--out``: that would put a file in place of a
        # pipe or a device (as root, ``/dev/null`` itself), not write into it.
        raise CliError(f"{out_file} is not a regular file; to write to stdout leave out --out")
    with reader(target) as sdb:
        if session_id is not None:
            record = sdb.export_session(session_id)
            if record is None:
                raise SessionNotFoundError(session_id)
            records: Any = [record]
            total = 1
        else:
            total = sdb.session_count(source)
            records = sdb.iter_export(source)
        writer = _stdout_writer() if out_file is None else _private_output(out_file)
        # The export's read unit ends here, before the store closes, however the loop ends.
        with writer as handle, progress_bar() as progress, _closing_iterator(records):
            task = progress.add_task("exporting", total=total)
            count = messages = 0
            for record in records:
                handle.write(_jsonl(record))
                count += 1
                messages += len(record["messages"])
                progress.advance(task)
    say(
        f"exported {count} session(s), {messages} message(s) to "
        f"{'stdout' if to_stdout else output}",
        stderr=to_stdout,
    )


@contextmanager
def _closing_iterator(records: Any) -> Iterator[None]:
    try:
        yield
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()


@contextmanager
def _stdout_writer() -> Iterator[IO[str]]:
    yield sys.stdout
    sys.stdout.flush()


COMMANDS = (
    Command(
        "sessions",
        sessions,
        (
            source_option("Only sessions of this source."),
            repeatable("--exclude-source", "Leave out this source (repeatable)."),
            arg(
                "--limit", type=non_negative_int, default=20, metavar="N", help="How many sessions."
            ),
            OFFSET,
            arg(
                "--include-children",
                action="store_true",
                help="Also list child sessions (subagents, branches, continuations), "
                "each as it is.",
            ),
            arg(
                "--tips",
                action=argparse.BooleanOptionalAction,
                default=True,
                help="List a compressed conversation under its newest continuation "
                "(--no-tips: as its first session).",
            ),
            arg("--all", dest="everything", action="store_true", help="Archived ones too."),
            arg("--archived", action="store_true", help="Only the archived ones."),
            arg("--pinned", action="store_true", help="Only the pinned ones."),
            *READING,
            JSON,
        ),
    ),
    Command("show", show_, (SESSION_ID, *READING, JSON)),
    Command("lineage", lineage, (SESSION_ID, *READING, JSON)),
    Command(
        "search",
        search,
        (
            arg(
                "query",
                metavar="QUERY",
                help='FTS5 query: words, "phrases", OR, NOT, -word, prefix*.',
            ),
            repeatable("--source", "Only this source (repeatable)."),
            repeatable("--exclude-source", "Not this source (repeatable)."),
            repeatable("--role", "Only this role (repeatable)."),
            arg("--limit", type=non_negative_int, default=20, metavar="N", help="How many hits."),
            OFFSET,
            *READING,
            JSON,
        ),
    ),
    Command(
        "stats",
        stats,
        (
            arg(
                "--top",
                type=non_negative_int,
                default=10,
                metavar="N",
                help="How many top sessions by tokens.",
            ),
            *READING,
            JSON,
        ),
    ),
    Command(
        "export",
        export,
        (
            arg(
                "session_id",
                nargs="?",
                metavar="ID",
                help="One session; every session when omitted.",
            ),
            arg(
                "--out",
                "-o",
                dest="output",
                type=file_path,
                metavar="FILE",
                help="JSONL file to write [default: stdout]",
            ),
            source_option("Only sessions of this source."),
            *READING,
        ),
    ),
)
"""The reading commands, in the help's order."""
