"""``hermes-store``: the store's operations from the command line, one command per verb.

Every command takes ``--db PATH`` or ``--url URL``; without either the store
is ``$HERMES_STORE_URL``, else ``$HERMES_HOME/state.db``, else
``~/.hermes/state.db`` (:func:`hermes_store.backends.location.resolve_url`). Only
``upgrade``, ``import`` and ``demo`` create a database that does not exist
yet; every other command refuses a missing file instead of leaving an empty
``state.db`` behind a typo.

Errors a user can cause (an unknown id, a missing file, a bad title, a
database locked past patience, a bad JSONL line) end in one red line on
stderr and exit status 1; usage errors are argparse's, exit status 2. The
grammar is :data:`COMMANDS`, at the end: one :class:`~.args.Command` per
function below, each function taking its options as keyword arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from hermes_store.cli.args import (
    CliError,
    Command,
    UsageError,
    arg,
    build_parser,
    directory_path,
    file_path,
    named,
    non_negative_float,
    non_negative_int,
    positive_int,
    store_url,
)
from hermes_store.cli.output import console, fail, say, show, warn, write_json
from hermes_store.cli.signals import StoppedBySignal, signals_unwind
from hermes_store.cli.table import search_table, sessions_table
from hermes_store.api.session_db import SessionDB
from hermes_store.backends.location import resolve_url, sqlite_file, sqlite_url
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.read_route import DEFAULT_MAX_LAG_S, READ_URL_ENV
from hermes_store.errors import (
    SchemaError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreError,
)
from hermes_store.schema.state import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    Ladder,
    ladder_of,
    read_state,
)
from hermes_store.uow.store import Store

if TYPE_CHECKING:
    from rich.progress import Progress

    from hermes_store.cli import render
else:

    class _Render:
        """:mod:`.render` (rich tables, trees), imported when a command first renders one.

        ``current`` prints three lines and ``--json`` prints JSON: neither needs
        rich, whose import is a good part of a short command's start-up.
        """

        def __getattr__(self, name: str) -> Any:
            from importlib import import_module

            return getattr(import_module("hermes_store.cli.render"), name)

    render = _Render()

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
# options shared by every command
# ----------------------------------------------------------------------
DB = arg(
    "--db",
    type=file_path,
    metavar="PATH",
    help="SQLite file of the store [default: $HERMES_STORE_URL, else "
    "$HERMES_HOME/state.db, else ~/.hermes/state.db]",
)
URL_ = arg(
    "--url", type=store_url, metavar="URL", help="SQLAlchemy URL of the store, instead of --db."
)
PATIENCE = arg(
    "--patience",
    type=non_negative_float,
    metavar="SECONDS",
    help="Seconds to wait for another writer's lock [default: 30]",
)
JSON = arg("--json", dest="as_json", action="store_true", help="Machine output: JSON on stdout.")
STORE = (DB, URL_, PATIENCE)
"""Where the store is, and how long to wait for its lock: every command but copy and recover."""
READ_URL = arg(
    "--read-url",
    type=store_url,
    metavar="URL",
    help="A PostgreSQL replica to read from; the primary answers when it is down or behind "
    f"[default: ${READ_URL_ENV} (for a server store)]",
)
MAX_REPLICA_LAG = arg(
    "--max-replica-lag",
    type=non_negative_float,
    default=DEFAULT_MAX_LAG_S,
    metavar="SECONDS",
    help="How far behind the replica may be and still answer.",
)
READING = (*STORE, READ_URL, MAX_REPLICA_LAG)
"""The reading commands': where the store is, and the replica that may answer for it."""
SESSION_ID = arg("session_id", metavar="ID", help="Session id.")


@dataclass(frozen=True)
class Target:
    url: URL
    patience: float | None
    read_url: str | None = None
    max_replica_lag: float = DEFAULT_MAX_LAG_S

    @property
    def path(self) -> Path | None:
        return sqlite_file(self.url)

    def describe(self) -> str:
        path = self.path
        return str(path) if path is not None else self.url.render_as_string(hide_password=True)

    def exists(self) -> bool:
        path = self.path
        return path is None or path.exists()


def _target(db: Path | None, url: str | None, patience: float | None) -> Target:
    if db is not None and url is not None:
        raise UsageError("give --db or --url, not both")
    try:
        resolved = sqlite_url(db) if db is not None else resolve_url(url)
    except ArgumentError as error:
        raise CliError(f"invalid store URL: {error}") from None
    return Target(resolved, patience)


def _reading_target(
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
) -> Target:
    """A reading command's target: the store, and the replica named by --read-url.

    ``$HERMES_STORE_READ_URL`` stands in for --read-url on a server store
    only: a fleet's environment names its replica once, and a command pointed
    at a SQLite file (which has none) is not refused for it.
    """
    target = _target(db, url, patience)
    if read_url is None and target.path is None:
        read_url = os.environ.get(READ_URL_ENV) or None
    return replace(target, read_url=read_url, max_replica_lag=max_replica_lag)


def _open(
    target: Target, *, create: bool = False, migrate: bool = True, read_only: bool = False
) -> Store:
    """The store at ``target``; a missing file is an error unless ``create``.

    ``read_only``: the reading commands open the file as it is -- never
    created, migrated, adopted or tightened -- and take no write lock.
    """
    if not create and not target.exists():
        raise CliError(
            f"no database at {target.describe()} "
            "(run 'hermes-store upgrade' to create one, or pass --db)"
        )
    policy = ContentionPolicy(patience_s=target.patience) if target.patience is not None else None
    return Store(
        target.url,
        policy=policy,
        migrate=migrate,
        read_only=read_only,
        read_url=target.read_url,
        max_replica_lag=target.max_replica_lag,
    )


@contextmanager
def _session_db(
    target: Target, *, create: bool = False, read_only: bool = False
) -> Iterator[SessionDB]:
    with _open(target, create=create, read_only=read_only) as store:
        yield SessionDB(store=store)


@contextmanager
def _reader(target: Target) -> Iterator[SessionDB]:
    """A SessionDB for a command that only reads: the file is opened read-only."""
    with _session_db(target, read_only=True) as sdb:
        yield sdb


def _state(store: Store) -> tuple[int | None, str | None]:
    with store.read() as uow:
        return read_state(uow.connection)


# ----------------------------------------------------------------------
# schema
# ----------------------------------------------------------------------
def upgrade(*, db: Path | None, url: str | None, patience: float | None) -> None:
    """Bring the store to the head schema: create it, or adopt and upgrade an old state.db."""
    target = _target(db, url, patience)
    existed = target.exists() and (target.path is None or target.path.stat().st_size > 0)
    if existed and not _writable(target) and _at_head(target):
        return

    def stepped(revision: str, what: str, seconds: float) -> None:
        say(f"upgrade {revision}: {what} ({seconds:.1f} s)", stderr=True)
        sys.stderr.flush()

    started = time.perf_counter()
    with _open(target, create=True, migrate=False) as store:
        before = _state(store) if existed else (None, None)
        store.upgrade_to_head(on_step=stepped)
        after = _state(store)
    took = f" in {time.perf_counter() - started:.1f} s"
    now = f"schema version {after[0]}, revision {after[1]}"
    if ladder_of(*after) is Ladder.AGENT:
        say(
            f"{target.describe()}: at the Hermes agent's own schema version {after[0]}; "
            "hermes_store uses it as it is and never migrates it (nothing changed)"
        )
    elif not existed or before == (None, None):  # a new file, or an empty server database
        say(f"created {target.describe()}: {now}")
    elif before == after:
        say(f"{target.describe()}: already at head ({now})")
    else:
        was = f"schema version {before[0]}, revision {before[1] or 'none'}"
        say(f"upgraded {target.describe()}: {was} -> {now}{took}")


def _writable(target: Target) -> bool:
    """Whether this user may write the store's file and folder (a server: assumed so).

    A writable upgrade of a current file still does what every writable open
    does (tighten a loose file to 0600); only a file this user may not write
    is looked at read-only instead.
    """
    path = target.path
    return path is None or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _at_head(target: Target) -> bool:
    """Say so and answer True when the store needs nothing: looked at read-only.

    Upgrading a current file writes nothing, so it must work where this user
    may only read the file; a writable open would want to write (tighten it,
    take the lock) before finding there is nothing to do.
    """
    try:
        with _open(target, read_only=True) as store:
            version, revision = _state(store)
            ours = store.ladder is not Ladder.AGENT  # the agent's may need a column mended
    except SchemaError:  # no store in it yet: the writable open says what it is
        return False
    if not ours or revision != HEAD_REVISION:
        return False
    say(f"{target.describe()}: already at head (schema version {version}, revision {revision})")
    return True


def current(*, db: Path | None, url: str | None, patience: float | None, as_json: bool) -> None:
    """Print the schema version and the Alembic revision of the store (changes nothing)."""
    target = _target(db, url, patience)
    with _open(target, read_only=True) as store:
        version, revision = _state(store)
        agent = store.ladder is Ladder.AGENT
        layout = store.layout.describe()
    if as_json:
        write_json(
            {
                "schema_version": version,
                "alembic_revision": revision,
                "head_revision": HEAD_REVISION,
                "at_head": revision == HEAD_REVISION and not agent,
                "ladder": "agent" if agent else "hermes_store",
                "layout": layout,
            }
        )
        return
    if agent:
        note = (
            " (the file is at the Hermes agent's own schema version: used as it is, "
            "never migrated by hermes_store)",
            "cyan",
        )
    elif revision == HEAD_REVISION:
        note = (" (head)", "green")
    elif revision is None:
        note = (" (not managed by Alembic yet; 'hermes-store upgrade' adopts it)", "yellow")
    else:
        note = (f" (head is {HEAD_REVISION}; run 'hermes-store upgrade')", "yellow")
    say(f"schema version:   {version if version is not None else 'none'}")
    say(f"alembic revision: {revision or 'none'}", note)
    say(f"layout:           {layout}")


# ----------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
    as_json: bool,
) -> None:
    """Recent conversations, newest first, with a preview of the first user message.

    Archived ones are left out unless --all (with them) or --archived (only
    them); --pinned lists the pinned ones alone.
    """
    if sum((everything, archived, pinned)) > 1:
        raise UsageError("give one of --all, --archived and --pinned")
    target = _reading_target(db, url, patience, read_url, max_replica_lag)
    with _reader(target) as sdb, sdb.store.read() as uow:
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
    as_json: bool,
) -> None:
    """A session and all its messages."""
    with _reader(_reading_target(db, url, patience, read_url, max_replica_lag)) as sdb:
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
    as_json: bool,
) -> None:
    """The sessions a session was split from, and those split off it, as a tree."""
    with _reader(_reading_target(db, url, patience, read_url, max_replica_lag)) as sdb:
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
    as_json: bool,
) -> None:
    """Full-text search across every session's messages, best match first."""
    with _reader(_reading_target(db, url, patience, read_url, max_replica_lag)) as sdb:
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
    as_json: bool,
) -> None:
    """Token totals and cost by model, and the sessions that used the most tokens."""
    with _reader(_reading_target(db, url, patience, read_url, max_replica_lag)) as sdb:
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


# ----------------------------------------------------------------------
# export / import
# ----------------------------------------------------------------------
def _progress() -> Progress:
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
    db: Path | None,
    url: str | None,
    patience: float | None,
    read_url: str | None,
    max_replica_lag: float,
) -> None:
    """Write sessions with their messages as JSON lines, one session per line."""
    if session_id is not None and source is not None:
        raise UsageError("--source filters an export of all sessions; not with an ID")
    target = None if output is None or str(output) == "-" else output  # None: stdout
    to_stdout = target is None
    if target is not None and not target.parent.is_dir():
        raise CliError(f"no such directory: {target.parent}")
    with _reader(_reading_target(db, url, patience, read_url, max_replica_lag)) as sdb:
        if session_id is not None:
            record = sdb.export_session(session_id)
            if record is None:
                raise SessionNotFoundError(session_id)
            records: Any = [record]
            total = 1
        else:
            total = sdb.session_count(source)
            records = sdb.iter_export(source)
        writer = _stdout_writer() if target is None else _private_output(target)
        # The export's read unit ends here, before the store closes, however the loop ends.
        with writer as handle, _progress() as progress, _closing_iterator(records):
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


def import_(*, file: Path, db: Path | None, url: str | None, patience: float | None) -> None:
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

    target = _target(db, url, patience)
    if not file.is_file():
        raise CliError(f"{'not a regular file' if file.exists() else 'no such file'}: {file}")
    # Check every line before writing anything: a bad line names itself, the store stays as it was.
    try:
        total = sum(1 for _ in records(file))
    except CliError as error:
        raise CliError(f"{file} {error}; nothing was imported") from None
    result = ImportResult()
    with _open(target, create=True) as store, _progress() as progress:
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

    origin = _target(None, source, None)
    if not origin.exists():
        raise CliError(f"no database at {origin.describe()} (--from)")
    goal = _target(None, destination, None)
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


# ----------------------------------------------------------------------
# cleanup
# ----------------------------------------------------------------------
def _auto_prune(
    older_than: float | None,
    source: str | None,
    dry_run: bool,
    min_interval_hours: float,
    db: Path | None,
    url: str | None,
    patience: float | None,
    as_json: bool,
) -> None:
    if source is not None or dry_run:
        raise UsageError("--auto prunes every source for real: drop --source and --dry-run")
    with _session_db(_target(db, url, patience)) as sdb:
        done = sdb.maybe_auto_prune_and_vacuum(
            retention_days=90 if older_than is None else older_than,
            min_interval_hours=min_interval_hours,
        )
    if as_json:
        write_json(done)
    elif done["skipped"]:
        say(f"skipped: the last automatic prune was less than {min_interval_hours:g} hour(s) ago")
    else:
        vacuumed = ", vacuumed" if done["vacuumed"] else ""
        say(f"pruned {done['pruned']} session(s){vacuumed}")
        if "error" in done:
            say(done["error"])


def prune(
    *,
    older_than: float | None,
    source: str | None,
    dry_run: bool,
    auto: bool,
    min_interval_hours: float,
    db: Path | None,
    url: str | None,
    patience: float | None,
    as_json: bool,
) -> None:
    """Delete ended sessions older than N days (pinned ones kept); children become roots.

    --auto: the upkeep a program runs at start -- prune at most every
    --min-interval-hours (default 90 days' age), then VACUUM when due.
    """
    if auto:
        _auto_prune(older_than, source, dry_run, min_interval_hours, db, url, patience, as_json)
        return
    if older_than is None:
        raise UsageError("give --older-than DAYS (or --auto)")
    from hermes_store.uow.pruning import prune_in_batches

    with _open(_target(db, url, patience)) as store:
        # The repository picks the sessions (one rule for both modes) and they are listed;
        # a real run then deletes them in short batches, as SessionDB.prune_sessions does,
        # so the agents writing to the file meanwhile wait for one batch at most.
        if not dry_run:
            store.refuse_if_read_only()
        # One plan, one cutoff: the sessions listed are the ones the batches delete, and
        # the count printed is what they deleted (with any that ended meanwhile).
        with store.read() as uow:
            plan = uow.sessions.prune_plan(older_than, source)
            found = (uow.sessions.get(session_id) for session_id, _ in plan[1])
            rows = [session.as_dict() for session in found if session is not None]
        count = len(rows) if dry_run else prune_in_batches(store, plan=plan)
    if as_json:
        write_json({"dry_run": dry_run, "count": count, "sessions": rows})
        return
    verb = "would prune" if dry_run else "pruned"
    scope = f" of source {source!r}" if source else ""
    heading = f"{verb} {count} ended session(s){scope} older than {older_than:g} day(s)"
    if rows:
        show(render.prunable_table(rows, heading, console().width))
    else:
        say(heading)


def _flag(
    flag: str,
    *,
    session_id: str,
    undo: bool,
    db: Path | None,
    url: str | None,
    patience: float | None,
) -> None:
    with _session_db(_target(db, url, patience)) as sdb:
        if flag == "archived":
            sdb.set_session_archived(session_id, not undo)
        else:
            sdb.set_session_pinned(session_id, not undo)
    done = {("archived", False): "archived", ("archived", True): "restored"}
    verb = done.get((flag, undo), "unpinned" if undo else "pinned")
    say(f"{verb} session {session_id} (and its compression chain)")


def archive(
    *, session_id: str, undo: bool, db: Path | None, url: str | None, patience: float | None
) -> None:
    """Hide a conversation from listings and counts (nothing is deleted); --undo restores it."""
    _flag("archived", session_id=session_id, undo=undo, db=db, url=url, patience=patience)


def pin(
    *, session_id: str, undo: bool, db: Path | None, url: str | None, patience: float | None
) -> None:
    """Keep a conversation: listed with the pinned ones, never pruned nor archived as stale."""
    _flag("pinned", session_id=session_id, undo=undo, db=db, url=url, patience=patience)


def delete(*, session_id: str, db: Path | None, url: str | None, patience: float | None) -> None:
    """Delete a session and its messages; sessions split off it become roots."""
    with _session_db(_target(db, url, patience)) as sdb:
        if not sdb.delete_session(session_id):
            raise SessionNotFoundError(session_id)
    say(f"deleted session {session_id}")


def title(
    *,
    session_id: str,
    new_title: str | None,
    db: Path | None,
    url: str | None,
    patience: float | None,
) -> None:
    """Print or set a session's title (unique among sessions, at most 100 characters)."""
    # Printing only reads: a file this user may only read is opened read-only.
    target = _target(db, url, patience)
    with _session_db(target, read_only=new_title is None) as sdb:
        if new_title is not None and not sdb.set_session_title(session_id, new_title):
            raise SessionNotFoundError(session_id)  # set_session_title says so with False
        session = sdb.get_session(session_id)
    if session is None:
        raise SessionNotFoundError(session_id)
    if new_title is None:
        say(session["title"] or "(no title)")
    elif session["title"] is None:
        say(f"title of {session_id} cleared")
    else:
        say(f"title of {session_id}: {session['title']}")


# ----------------------------------------------------------------------
# health
# ----------------------------------------------------------------------
def check(
    *,
    repair: bool,
    db: Path | None,
    url: str | None,
    patience: float | None,
    as_json: bool,
) -> int | None:
    """Check integrity, foreign keys, the search indexes and the counters; exit 1 if not healthy."""
    from hermes_store.backends.sqlite.short_file import is_empty_file, refuse_short_file
    from hermes_store.tools.check import check as run_check

    target = _target(db, url, patience)
    if target.path is not None and is_empty_file(target.path):  # --repair would write a header
        try:  # an empty file with backups beside it is what is left of a store
            refuse_short_file(target.path)
        except StoreCorruptError as error:
            return _unopenable(error, as_json)
        raise SchemaError(
            f"{target.path} is empty (0 bytes, no store): nothing to check or repair; "
            "'hermes-store upgrade' makes a new store there"
        )
    # Looking only reads (the file is neither migrated nor tightened); --repair writes.
    try:
        with _open(target, migrate=False, read_only=not repair) as store:
            report = run_check(store, repair=repair)
    except StoreCorruptError as error:  # too damaged to open: no survey, only the way out
        return _unopenable(error, as_json)
    if as_json:
        write_json({**asdict(report), "ok": report.ok})
        return None if report.ok else 1
    if report.sqlite_library is not None:
        from hermes_store.backends.sqlite.library import WAY_OUT

        bug = (
            f"SQLite {report.sqlite_library} has the WAL-reset bug; {WAY_OUT}"
            if report.sqlite_affected
            else None
        )
        line = render.status_line("SQLite library", bug)
        if not report.sqlite_affected:
            line.append(f" ({report.sqlite_library}, free of the WAL-reset bug)")
        show(line)
    integrity = "; ".join(report.integrity[:3]) if report.integrity else None
    if integrity and len(report.integrity) > 3:
        integrity += f" (and {len(report.integrity) - 3} more)"
    show(render.status_line("integrity", integrity))
    if report.damage is not None:
        _print_damage(report.damage)
        return 1
    fk = f"{len(report.foreign_keys)} dangling reference(s)" if report.foreign_keys else None
    show(render.status_line("foreign keys", fk))
    show(render.status_line("full-text index", report.fts, report.rebuilt_fts))
    if report.undecodable:
        rows = ", ".join(f"{r['table']} id {r['id']} {r['column']}" for r in report.undecodable[:5])
        more = len(report.undecodable) - 5
        rows += f" (and {more} more)" if more > 0 else ""
        bad_text = f"{len(report.undecodable)} text value(s) not UTF-8: {rows}"
    else:
        bad_text = None
    show(render.status_line("stored text", bad_text, report.rewrote_undecodable))
    counted = f"{len(report.miscounted)} miscounted session(s)" if report.miscounted else None
    show(render.status_line("counters", counted, bool(report.repaired_counters)))
    if report.miscounted:
        show(render.miscounted_table(report.miscounted))
    totals = "; ".join(report.totals) if report.totals else None
    show(render.status_line("kept totals", totals, report.repaired_totals))
    if report.ok:
        say(("ok", "bold green"))
        return None
    hint = "" if repair else "; 'hermes-store check --repair' mends counters, indexes and text"
    say((f"problems found{hint}", "bold red"))
    return 1


def optimize(
    *,
    no_vacuum: bool,
    db: Path | None,
    url: str | None,
    patience: float | None,
    as_json: bool,
) -> None:
    """Give space back: merge the search indexes (FTS optimize), then VACUUM the file.

    VACUUM holds the write lock while it rewrites the file (a minute or more
    on a multi-gigabyte file): agents writing meanwhile wait, and give up
    after their own patience. Run it while they are idle, or use --no-vacuum.
    """
    from hermes_store.tools.optimize import optimize as run_optimize
    from hermes_store.uow import upkeep

    target = _target(db, url, patience)
    path = target.path
    if path is None:  # a server: VACUUM (ANALYZE) through its backend, recorded the same way
        with _open(target) as store:
            if not no_vacuum:
                upkeep.vacuum(store)
        if as_json:
            write_json({"vacuumed": not no_vacuum})
        else:
            say("vacuumed and analyzed" if not no_vacuum else "nothing to merge on PostgreSQL")
        return
    with _open(target) as store:  # brought to the head, its layout read
        with store.read() as uow:
            layout = uow.layout
        report = run_optimize(
            path, layout, vacuum=not no_vacuum, patience_s=store.policy.patience_s
        )
        if not no_vacuum and layout.state_meta:  # shared with the agent's own upkeep
            store.transact(lambda uow: uow.meta.set(upkeep.LAST_VACUUM_KEY, repr(store.clock())))
    if as_json:
        write_json(report.as_dict())
        return
    say(f"{path}: {report.before_bytes / 1e6:,.1f} MB before")
    for step in report.steps:
        say(
            f"  {step.name}: {step.seconds:.1f} s, file {step.file_bytes / 1e6:,.1f} MB, "
            f"free {step.free_bytes / 1e6:,.1f} MB"
        )
    for note in report.notes:
        say(f"  note: {note}")
    say(
        f"{report.after_bytes / 1e6:,.1f} MB after: "
        f"{report.given_back_bytes / 1e6:,.1f} MB given back"
    )


def backup_(
    *, to: Path | None, keep: int, db: Path | None, url: str | None, patience: float | None
) -> None:
    """Copy the store, while agents keep writing, into a verified 0600 backup; keep N."""
    from hermes_store.tools.backup import backup

    target = _target(db, url, patience)
    report = backup(target.url, to, keep=keep)
    removed = f"; removed {len(report.removed)} older backup(s)" if report.removed else ""
    say(
        f"backed up {target.describe()} to {report.path} ({report.bytes / 1e6:.1f} MB, "
        f"{report.sessions} sessions, {report.messages} messages, verified, "
        f"{report.seconds:.2f} s){removed}"
    )


def recover_(*, source: Path, destination: Path, as_json: bool) -> None:
    """Salvage every readable session and message of a damaged file into a new store."""
    from hermes_store.tools.recovery.recover import recover

    report = recover(source, destination)
    if as_json:
        write_json(asdict(report))
        return
    show(render.recovery_summary(report), soft_wrap=True)


def _unopenable(error: StoreCorruptError, as_json: bool) -> int:
    """``check``'s answer for a file too damaged to open: the damage and the next step.

    The error's own message ends by pointing at ``check``, the command that
    is running; here the way out is said without it.
    """
    if as_json:
        write_json({"ok": False, "integrity": [error.detail], "next_step": error.way_out})
        return 1
    show(render.status_line("integrity", error.detail))
    say((f"damaged, cannot be opened: {error.way_out}", "bold red"))
    return 1


def _print_damage(damage: Any) -> None:
    """The survey of a damaged file: its damaged trees, what reads, what to do."""
    show(render.damage_table(damage.trees))
    say(
        f"readable: {damage.sessions_readable} of {damage.sessions_claimed} session(s); "
        f"{damage.messages_readable} message(s), where the counters claim "
        f"{damage.messages_claimed} and the index lists {damage.messages_indexed}"
        + (
            f" ({damage.orphan_rows} only by reading pages past the damage)"
            if damage.orphan_rows
            else ""
        )
    )
    say((f"damaged pages: {damage.next_step}", "bold red"))


def demo(*, db: Path | None, url: str | None, patience: float | None) -> int:
    """Write a demo session with a tool call and a continuation, then search it.

    Into ./hermes-demo/state.db unless --db or --url says otherwise (never the
    agent's store by default), and never into a store holding other sessions.
    """
    from hermes_store.api.demo import DEMO_STORE, run

    if db is None and url is None:
        db = DEMO_STORE
    with _session_db(_target(db, url, patience), create=True) as sdb:
        return run(sdb)


# ----------------------------------------------------------------------
# the grammar
# ----------------------------------------------------------------------
def _source(help: str) -> Any:
    return arg("--source", metavar="SOURCE", help=help)


def _repeatable(name: str, help: str) -> Any:
    return arg(name, action="append", metavar=name.lstrip("-").split("-")[-1].upper(), help=help)


OFFSET = arg(
    "--offset", type=non_negative_int, default=0, metavar="N", help="Skip this many first."
)


COMMANDS = (
    Command("upgrade", upgrade, STORE),
    Command("current", current, (*STORE, JSON)),
    Command(
        "sessions",
        sessions,
        (
            _source("Only sessions of this source."),
            _repeatable("--exclude-source", "Leave out this source (repeatable)."),
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
            _repeatable("--source", "Only this source (repeatable)."),
            _repeatable("--exclude-source", "Not this source (repeatable)."),
            _repeatable("--role", "Only this role (repeatable)."),
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
            _source("Only sessions of this source."),
            *READING,
        ),
    ),
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
    Command(
        "prune",
        prune,
        (
            arg(
                "--older-than",
                type=non_negative_float,
                metavar="DAYS",
                help="Age in days (by start time); --auto's default is 90.",
            ),
            _source("Only sessions of this source."),
            arg(
                "--dry-run", action="store_true", help="List what would be deleted; delete nothing."
            ),
            arg(
                "--auto",
                action="store_true",
                help="Upkeep: prune unless done within --min-interval-hours, VACUUM when due.",
            ),
            arg(
                "--min-interval-hours",
                type=non_negative_float,
                default=24.0,
                metavar="HOURS",
                help="With --auto: how long the last automatic prune holds.",
            ),
            *STORE,
            JSON,
        ),
    ),
    Command("delete", delete, (SESSION_ID, *STORE)),
    Command(
        "archive",
        archive,
        (SESSION_ID, arg("--undo", action="store_true", help="Restore it instead."), *STORE),
    ),
    Command(
        "pin",
        pin,
        (SESSION_ID, arg("--undo", action="store_true", help="Unpin it instead."), *STORE),
    ),
    Command(
        "title",
        title,
        (
            SESSION_ID,
            arg(
                "new_title",
                nargs="?",
                metavar="TITLE",
                help="New title ('' clears it); omit to print the current one.",
            ),
            *STORE,
        ),
    ),
    Command(
        "check",
        check,
        (
            arg(
                "--repair",
                action="store_true",
                help="Recompute counters and rebuild stale search indexes.",
            ),
            *STORE,
            JSON,
        ),
    ),
    Command(
        "optimize",
        optimize,
        (
            arg(
                "--no-vacuum",
                action="store_true",
                help="Only merge the search indexes; keep the file's size.",
            ),
            *STORE,
            JSON,
        ),
    ),
    Command(
        "backup",
        backup_,
        (
            arg(
                "--to",
                type=directory_path,
                metavar="DIR",
                help="Directory for the backups [default: $HERMES_HOME/backups]",
            ),
            arg(
                "--keep",
                type=positive_int,
                default=3,
                metavar="N",
                help="Backups to keep; older ones are deleted.",
            ),
            *STORE,
        ),
    ),
    Command(
        "recover",
        recover_,
        (
            arg(
                "--from",
                dest="source",
                type=file_path,
                required=True,
                metavar="FILE",
                help="The damaged state.db (only read).",
            ),
            arg(
                "--to",
                dest="destination",
                type=file_path,
                required=True,
                metavar="FILE",
                help="The new file to write (must not exist).",
            ),
            JSON,
        ),
    ),
    Command("demo", demo, STORE),
)
"""Every command, in the order ``hermes-store --help`` lists them."""


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


if __name__ == "__main__":
    main()
