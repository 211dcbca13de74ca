"""``hermes-store``: the store's operations from the command line, one command per verb.

Every command takes ``--db PATH`` or ``--url URL``; without either the store
is ``$HERMES_STORE_URL``, else ``$HERMES_HOME/state.db``, else
``~/.hermes/state.db`` (:func:`hermes_store.backends.location.resolve_url`). Only
``upgrade``, ``import`` and ``demo`` create a database that does not exist
yet; every other command refuses a missing file instead of leaving an empty
``state.db`` behind a typo.

Errors a user can cause (an unknown id, a missing file, a bad title, a
database locked past patience, a bad JSONL line) end in one red line on
stderr and exit code 1; usage errors are typer's, exit code 2.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from rich.console import Console
from rich.text import Text
from sqlalchemy import select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.types import REAL, Integer

from hermes_store.api.session_db import JSON_MESSAGE_FIELDS, SessionDB
from hermes_store.backends.location import resolve_url, sqlite_file, sqlite_url
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.domain.arguments import int_arg, number_arg, text_arg
from hermes_store.errors import InvalidInputError, SessionNotFoundError, StoreError
from hermes_store.schema.state import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    Ladder,
    ladder_of,
    read_state,
)
from hermes_store.schema.tables import messages_table, sessions_table
from hermes_store.uow.store import Store
from hermes_store.uow.unit import UnitOfWork

if TYPE_CHECKING:
    from rich.progress import Progress

    from hermes_store.api import cli_render as render
else:

    class _Render:
        """:mod:`.cli_render` (tables, trees), imported when a command first renders one.

        ``current`` prints three lines and ``--json`` prints JSON: neither needs
        rich's tables, whose import is a good part of a short command's start-up.
        """

        def __getattr__(self, name: str) -> Any:
            from hermes_store.api import cli_render

            return getattr(cli_render, name)

    render = _Render()

PIPED_WIDTH = 160
"""Width of tables written to a pipe or file, where rich would otherwise assume 80 columns."""


def _console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPED_WIDTH
    return console


out = _console()
err = _console(stderr=True)

app = typer.Typer(
    name="hermes-store",
    help="The Hermes agent's session store (state.db): inspect, search, export, maintain.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals would hold whole conversations
    # Plain help: typer's rich panels show every flag as taking a value (`--json <bool>`).
    rich_markup_mode=None,
)


def _version(asked: bool) -> None:
    if not asked:
        return

    try:
        version = metadata.version("hermes-store")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "(not installed)"
    out.print(
        Text(
            f"hermes-store {version} (schema version {HEAD_SCHEMA_VERSION}, "
            f"revision {HEAD_REVISION})"
        )
    )
    raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """The Hermes agent's session store (state.db): inspect, search, export, maintain."""


class CliError(Exception):
    """A user mistake the command explains in one line (exit code 1)."""


# ----------------------------------------------------------------------
# options shared by every command
# ----------------------------------------------------------------------
DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="SQLite file of the store [default: $HERMES_STORE_URL, else "
        "$HERMES_HOME/state.db, else ~/.hermes/state.db]",
        dir_okay=False,
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="SQLAlchemy URL of the store, instead of --db.", show_default=False),
]
PatienceOption = Annotated[
    float | None,
    typer.Option(
        "--patience",
        min=0,
        help="Seconds to wait for another writer's lock [default: 30]",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine output: JSON on stdout.")]
SessionIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="Session id.", show_default=False)
]


@dataclass(frozen=True)
class Target:
    url: URL
    patience: float | None

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
        raise typer.BadParameter("give --db or --url, not both", param_hint="--db / --url")
    try:
        resolved = sqlite_url(db) if db is not None else resolve_url(url)
    except ArgumentError as error:
        raise CliError(f"invalid store URL: {error}") from None
    return Target(resolved, patience)


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
    return Store(target.url, policy=policy, migrate=migrate, read_only=read_only)


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
@app.command()
def upgrade(db: DbOption = None, url: UrlOption = None, patience: PatienceOption = None) -> None:
    """Bring the store to the head schema: create it, or adopt and upgrade an old state.db."""
    target = _target(db, url, patience)
    existed = target.exists() and (target.path is None or target.path.stat().st_size > 0)
    with _open(target, create=True, migrate=False) as store:
        before = _state(store) if existed else (None, None)
        store.upgrade_to_head()
        after = _state(store)
    now = f"schema version {after[0]}, revision {after[1]}"
    if ladder_of(*after) is Ladder.AGENT:
        out.print(
            Text(
                f"{target.describe()}: at the Hermes agent's own schema version {after[0]}; "
                "hermes_store uses it as it is and never migrates it (nothing changed)"
            )
        )
    elif not existed or before == (None, None):  # a new file, or an empty server database
        out.print(Text(f"created {target.describe()}: {now}"))
    elif before == after:
        out.print(Text(f"{target.describe()}: already at head ({now})"))
    else:
        was = f"schema version {before[0]}, revision {before[1] or 'none'}"
        out.print(Text(f"upgraded {target.describe()}: {was} -> {now}"))


@app.command()
def current(
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the schema version and the Alembic revision of the store (changes nothing)."""

    target = _target(db, url, patience)
    with _open(target, read_only=True) as store:
        version, revision = _state(store)
        agent = store.ladder is Ladder.AGENT
        layout = store.layout.describe()
    if as_json:
        render.write_json(
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
    out.print(Text(f"schema version:   {version if version is not None else 'none'}"))
    line = Text(f"alembic revision: {revision or 'none'}")
    if agent:
        line.append(
            " (the file is at the Hermes agent's own schema version: used as it is, "
            "never migrated by hermes_store)",
            "cyan",
        )
    elif revision == HEAD_REVISION:
        line.append(" (head)", style="green")
    elif revision is None:
        line.append(" (not managed by Alembic yet; 'hermes-store upgrade' adopts it)", "yellow")
    else:
        line.append(f" (head is {HEAD_REVISION}; run 'hermes-store upgrade')", style="yellow")
    out.print(line)
    out.print(Text(f"layout:           {layout}"))


# ----------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------
@app.command()
def sessions(
    source: Annotated[str | None, typer.Option(help="Only sessions of this source.")] = None,
    exclude_source: Annotated[
        list[str] | None,
        typer.Option("--exclude-source", help="Leave out this source (repeatable)."),
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="How many sessions.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many first.")] = 0,
    include_children: Annotated[
        bool,
        typer.Option(
            "--include-children",
            help="Also list child sessions (subagents, branches, continuations), each as it is.",
        ),
    ] = False,
    tips: Annotated[
        bool,
        typer.Option(
            "--tips/--no-tips",
            help="List a compressed conversation under its newest continuation "
            "(--no-tips: as its first session).",
        ),
    ] = True,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recent conversations, newest first, with a preview of the first user message."""
    with _reader(_target(db, url, patience)) as sdb:
        rows = sdb.list_sessions_rich(
            source=source,
            exclude_sources=exclude_source,
            limit=limit,
            offset=offset,
            include_children=include_children,
            project_compression_tips=tips,
        )
    if as_json:
        render.write_json(rows)
    elif rows:
        out.print(render.sessions_table(rows))
    else:
        out.print("no sessions" + (f" of source {source!r}" if source else ""))


@app.command()
def show(
    session_id: SessionIdArgument,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """A session and all its messages."""
    with _reader(_target(db, url, patience)) as sdb:
        exported = sdb.export_session(session_id)
    if exported is None:
        raise SessionNotFoundError(session_id)
    if as_json:
        render.write_json(exported)
    else:
        render.print_session(out, exported)


@app.command()
def lineage(
    session_id: SessionIdArgument,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """The sessions a session was split from, and those split off it, as a tree."""
    with _reader(_target(db, url, patience)) as sdb:
        ancestors = sdb.get_ancestors(session_id)
        descendants = sdb.get_descendants(session_id) if ancestors else []
    if not ancestors:
        raise SessionNotFoundError(session_id)
    if as_json:
        render.write_json(
            {
                "session": ancestors[0],
                "ancestors": ancestors[1:],
                "descendants": [row for row in descendants if row["id"] != session_id],
            }
        )
    else:
        out.print(render.lineage_tree(session_id, ancestors, descendants))


@app.command()
def search(
    query: Annotated[
        str, typer.Argument(help='FTS5 query: words, "phrases", OR, NOT, -word, prefix*.')
    ],
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Only this source (repeatable).")
    ] = None,
    exclude_source: Annotated[
        list[str] | None, typer.Option("--exclude-source", help="Not this source (repeatable).")
    ] = None,
    role: Annotated[
        list[str] | None, typer.Option("--role", help="Only this role (repeatable).")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="How many hits.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many first.")] = 0,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Full-text search across every session's messages, best match first."""
    with _reader(_target(db, url, patience)) as sdb:
        hits = sdb.search_messages(
            query,
            source_filter=source or None,
            exclude_sources=exclude_source or None,
            role_filter=role or None,
            limit=limit,
            offset=offset,
        )
    if as_json:
        render.write_json(hits)
    elif hits:
        out.print(render.search_table(hits, query, offset))
    else:
        out.print(Text(f"no matches for {query!r}"))


@app.command()
def stats(
    top: Annotated[int, typer.Option(min=0, help="How many top sessions by tokens.")] = 10,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Token totals and cost by model, and the sessions that used the most tokens."""
    with _reader(_target(db, url, patience)) as sdb:
        result: dict[str, Any] = {
            "sessions": sdb.session_count(),
            "messages": sdb.message_count(),
            "by_model": sdb.token_usage_by_model(),
            "top_sessions": sdb.top_sessions_by_tokens(top),
        }
    if as_json:
        render.write_json(result)
        return
    out.print(Text(f"{result['sessions']:,} session(s), {result['messages']:,} message(s)"))
    out.print(render.usage_table(result["by_model"]))
    out.print(render.top_sessions_table(result["top_sessions"]))


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


@app.command()
def export(
    session_id: Annotated[
        str | None,
        typer.Argument(metavar="ID", help="One session; every session when omitted."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="JSONL file to write [default: stdout]", dir_okay=False),
    ] = None,
    source: Annotated[str | None, typer.Option(help="Only sessions of this source.")] = None,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
) -> None:
    """Write sessions with their messages as JSON lines, one session per line."""
    if session_id is not None and source is not None:
        raise typer.BadParameter(
            "filters an export of all sessions; not with an ID", param_hint="--source"
        )
    target = None if output is None or str(output) == "-" else output  # None: stdout
    to_stdout = target is None
    if target is not None and not target.parent.is_dir():
        raise CliError(f"no such directory: {target.parent}")
    with _reader(_target(db, url, patience)) as sdb:
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
    summary = Text(
        f"exported {count} session(s), {messages} message(s) to {'stdout' if to_stdout else output}"
    )
    (err if to_stdout else out).print(summary)


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


_SESSION_COLUMNS = list(sessions_table.columns)
_NON_EMPTY = ("id", "source", "role")
_MESSAGE_COLUMNS = [c for c in messages_table.columns if c.name not in ("id", "session_id")]


@dataclass
class _Record:
    line: int
    session: dict[str, Any]
    messages: list[dict[str, Any]]
    message_ids: list[int] | None  # the file's ids, when every message has a distinct one


def _column_value(column: Any, label: str, value: Any) -> Any:
    """A value from the file checked against the column's type (None where nullable)."""
    optional = bool(column.nullable) and column.name not in ("id",)
    if value is None and not optional:
        raise InvalidInputError(f"{label} is required")
    if isinstance(column.type, Integer):
        return int_arg(label, value, optional=optional)
    if isinstance(column.type, REAL):
        return number_arg(label, value, optional=optional)
    return text_arg(label, value, optional=optional, non_empty=column.name in _NON_EMPTY)


def _json_text(label: str, value: Any) -> str | None:
    """A decoded JSON field of an export back to the text the store keeps.

    Export decodes stored JSON and passes text that is not JSON through as
    it is; so a string that does not parse is put back raw, anything else is
    encoded again -- either way ``get_messages`` reads back the same value.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return text_arg(label, value)
    try:
        return text_arg(label, json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{label} is not JSON-serializable: {error}") from None


def _parse_line(raw: bytes, line: int) -> _Record | None:
    """One line of an export as checked rows; None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CliError(f"line {line}: not UTF-8 text ({error.reason})") from None
    text = text.lstrip("\ufeff") if line == 1 else text
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except ValueError as error:
        raise CliError(f"line {line}: not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise CliError(f"line {line}: expected a JSON object, got {type(obj).__name__}")
    try:
        session: dict[str, Any] = {}
        for column in _SESSION_COLUMNS:
            if column.name not in obj and column.nullable and column.name != "id":
                continue  # absent: the column's default applies
            value = obj.get(column.name)
            if column.name == "model_config" and value is not None and not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            session[column.name] = _column_value(column, column.name, value)
        raw_messages = obj.get("messages", [])
        if not isinstance(raw_messages, list):
            raise InvalidInputError(f"messages must be a list, got {type(raw_messages).__name__}")
        messages = []
        ids: list[Any] = []
        for index, message in enumerate(raw_messages):
            label = f"messages[{index}]."
            if not isinstance(message, dict):
                raise InvalidInputError(
                    f"messages[{index}] must be an object, got {type(message).__name__}"
                )
            row: dict[str, Any] = {"session_id": session["id"]}
            for column in _MESSAGE_COLUMNS:
                value = message.get(column.name)
                if column.name in JSON_MESSAGE_FIELDS:
                    row[column.name] = _json_text(label + column.name, value)
                else:
                    row[column.name] = _column_value(column, label + column.name, value)
            messages.append(row)
            ids.append(message.get("id"))
    except InvalidInputError as error:
        raise CliError(f"line {line}: {error}") from None
    keep_ids = (
        all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids)
        and len(set(ids)) == len(ids)
        and bool(ids)
    )
    order = sorted(
        range(len(messages)),
        key=lambda i: (messages[i]["timestamp"], ids[i] if keep_ids else i),
    )
    return _Record(
        line=line,
        session=session,
        messages=[messages[i] for i in order],
        message_ids=[ids[i] for i in order] if keep_ids else None,
    )


def _records(path: Path) -> Iterator[_Record]:
    with path.open("rb") as handle:
        for line, raw in enumerate(handle, start=1):
            record = _parse_line(raw, line)
            if record is not None:
                yield record


@dataclass
class _ImportResult:
    sessions: int = 0
    messages: int = 0
    skipped: int = 0
    renumbered: int = 0
    warnings: list[str] = field(default_factory=list)
    pending_parents: dict[str, str] = field(default_factory=dict)


def _ids_free(uow: UnitOfWork, ids: list[int]) -> bool:
    """True when no stored message has an id in the range of ``ids``."""
    statement = (
        select(messages_table.c.id).where(messages_table.c.id.between(min(ids), max(ids))).limit(1)
    )
    return uow.connection.execute(statement).first() is None


def _import_one(uow: UnitOfWork, record: _Record, result: _ImportResult) -> None:
    # Here, not at the top: the repositories build their statements at import,
    # which a reading command such as ``current`` would pay for nothing.
    from hermes_store.repositories.messages import insert_rows
    from hermes_store.repositories.sessions import insert_session_row

    values = dict(record.session)
    session_id = values["id"]
    if uow.sessions.exists(session_id):
        result.skipped += 1
        return
    parent = values.get("parent_session_id")
    if parent is not None and not uow.sessions.exists(parent):
        values["parent_session_id"] = None  # linked once the parent is in the store
        result.pending_parents[session_id] = parent
    title = values.get("title")
    if title is not None:
        owner = uow.sessions.title_owner(title, excluding=session_id)
        if owner is not None:
            values["title"] = None
            result.warnings.append(
                f"line {record.line}: title {title!r} already belongs to session {owner}; "
                f"session {session_id} imported without a title"
            )
    insert_session_row(uow.connection, uow.layout, values)
    rows = record.messages
    if record.message_ids is not None and _ids_free(uow, record.message_ids):
        rows = [{**row, "id": i} for row, i in zip(rows, record.message_ids, strict=True)]
    elif rows:
        result.renumbered += 1
    insert_rows(uow.connection, uow.layout, rows)
    result.sessions += 1
    result.messages += len(rows)


def _link_parents(uow: UnitOfWork, result: _ImportResult) -> None:
    for child, parent in list(result.pending_parents.items()):
        if uow.sessions.exists(parent):
            uow.connection.execute(
                update(sessions_table)
                .where(sessions_table.c.id == child)
                .values(parent_session_id=parent)
            )
            del result.pending_parents[child]


BATCH_SESSIONS = 200
BATCH_MESSAGES = 5000


@app.command("import")
def import_(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="JSONL file written by 'export'.", dir_okay=False)
    ],
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
) -> None:
    """Add the sessions of an export; a session id already in the store is skipped."""
    target = _target(db, url, patience)
    if not file.is_file():
        raise CliError(f"{'not a regular file' if file.exists() else 'no such file'}: {file}")
    # Check every line before writing anything: a bad line names itself, the store stays as it was.
    try:
        total = sum(1 for _ in _records(file))
    except CliError as error:
        raise CliError(f"{file} {error}; nothing was imported") from None
    result = _ImportResult()
    with _open(target, create=True) as store, _progress() as progress:
        task = progress.add_task("importing", total=total)
        batch: list[_Record] = []
        batch_messages = 0

        def flush() -> None:
            nonlocal batch_messages
            with store.write() as uow:
                for record in batch:
                    _import_one(uow, record, result)
                _link_parents(uow, result)
            progress.advance(task, len(batch))
            batch.clear()
            batch_messages = 0

        for record in _records(file):
            batch.append(record)
            if (
                len(batch) >= BATCH_SESSIONS
                or sum(len(r.messages) for r in batch) >= BATCH_MESSAGES
            ):
                flush()
        if batch:
            flush()
    for warning in result.warnings[:10]:
        err.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    if len(result.warnings) > 10:
        err.print(Text(f"warning: ... and {len(result.warnings) - 10} more", style="yellow"))
    if result.pending_parents:
        orphans = ", ".join(sorted(result.pending_parents)[:5])
        err.print(
            Text(
                f"warning: {len(result.pending_parents)} session(s) imported without their "
                f"parent, which is neither in the file nor in the store: {orphans}",
                style="yellow",
            ),
            soft_wrap=True,
        )
    out.print(
        Text(
            f"imported {result.sessions} session(s), {result.messages} message(s) from {file}; "
            f"skipped {result.skipped} already present"
        )
    )


@app.command("copy")
def copy_(
    source: Annotated[
        str,
        typer.Option("--from", help="Store to copy: a SQLite path or URL.", show_default=False),
    ],
    destination: Annotated[
        str,
        typer.Option(
            "--to",
            help="Store to copy into, e.g. postgresql+psycopg://user@host/db (created if empty).",
            show_default=False,
        ),
    ],
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Rows per transaction.")
    ] = 1000,
) -> None:
    """Copy every session and message into another store (SQLite -> PostgreSQL); idempotent."""
    from hermes_store.tools.copy import copy_store

    origin = _target(None, source, None)
    if not origin.exists():
        raise CliError(f"no database at {origin.describe()} (--from)")
    goal = _target(None, destination, None)
    with _progress() as progress:
        tasks: dict[str, Any] = {}

        def show(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = progress.add_task(f"copying {phase}", total=total)
            progress.update(tasks[phase], completed=done, total=total)

        report = copy_store(origin.url, goal.url, batch_size=batch_size, progress=show)
    if report.dangling_parents:
        names = ", ".join(report.dangling_parents[:5])
        err.print(
            Text(
                f"warning: {len(report.dangling_parents)} session(s) name a parent that is not "
                f"in the source and were copied without it: {names}",
                style="yellow",
            ),
            soft_wrap=True,
        )
    there_already = (
        " (the rest were there already)"
        if (report.sessions_copied, report.messages_copied)
        != (report.sessions_total, report.messages_total)
        else ""
    )
    out.print(
        Text(
            f"copied {report.sessions_copied} of {report.sessions_total} session(s) and "
            f"{report.messages_copied} of {report.messages_total} message(s) to "
            f"{goal.describe()}{there_already}; verified: every session "
            "is there with the same number of messages"
        ),
        soft_wrap=True,
    )


# ----------------------------------------------------------------------
# cleanup
# ----------------------------------------------------------------------
@app.command()
def prune(
    older_than: Annotated[
        float, typer.Option("--older-than", min=0, help="Age in days (by start time).")
    ],
    source: Annotated[str | None, typer.Option(help="Only sessions of this source.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")
    ] = False,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete ended sessions older than N days; their children are kept, as roots."""
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
        render.write_json({"dry_run": dry_run, "count": count, "sessions": rows})
        return
    verb = "would prune" if dry_run else "pruned"
    scope = f" of source {source!r}" if source else ""
    heading = f"{verb} {count} ended session(s){scope} older than {older_than:g} day(s)"
    if rows:
        out.print(render.prunable_table(rows, heading))
    else:
        out.print(Text(heading))


@app.command()
def delete(
    session_id: SessionIdArgument,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
) -> None:
    """Delete a session and its messages; sessions split off it become roots."""
    with _session_db(_target(db, url, patience)) as sdb:
        if not sdb.delete_session(session_id):
            raise SessionNotFoundError(session_id)
    out.print(Text(f"deleted session {session_id}"))


@app.command()
def title(
    session_id: SessionIdArgument,
    new_title: Annotated[
        str | None,
        typer.Argument(help="New title ('' clears it); omit to print the current one."),
    ] = None,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
) -> None:
    """Print or set a session's title (unique among sessions, at most 100 characters)."""
    with _session_db(_target(db, url, patience)) as sdb:
        if new_title is not None and not sdb.set_session_title(session_id, new_title):
            raise SessionNotFoundError(session_id)  # set_session_title says so with False
        session = sdb.get_session(session_id)
    if session is None:
        raise SessionNotFoundError(session_id)
    if new_title is None:
        out.print(Text(session["title"] or "(no title)"))
    elif session["title"] is None:
        out.print(Text(f"title of {session_id} cleared"))
    else:
        out.print(Text(f"title of {session_id}: {session['title']}"))


# ----------------------------------------------------------------------
# health
# ----------------------------------------------------------------------
@app.command()
def check(
    repair: Annotated[
        bool, typer.Option("--repair", help="Recompute counters and rebuild stale search indexes.")
    ] = False,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check integrity, foreign keys, the search indexes and the counters; exit 1 if not healthy."""
    from hermes_store.tools.check import check as run_check

    # Looking only reads (the file is neither migrated nor tightened); --repair writes.
    with _open(_target(db, url, patience), migrate=False, read_only=not repair) as store:
        report = run_check(store, repair=repair)
    if as_json:
        render.write_json({**asdict(report), "ok": report.ok})
    else:
        integrity = "; ".join(report.integrity[:3]) if report.integrity else None
        if integrity and len(report.integrity) > 3:
            integrity += f" (and {len(report.integrity) - 3} more)"
        out.print(render.status_line("integrity", integrity))
        if report.damage is not None:
            _print_damage(report.damage)
            raise typer.Exit(1)
        fk = f"{len(report.foreign_keys)} dangling reference(s)" if report.foreign_keys else None
        out.print(render.status_line("foreign keys", fk))
        out.print(render.status_line("full-text index", report.fts, report.rebuilt_fts))
        counted = f"{len(report.miscounted)} miscounted session(s)" if report.miscounted else None
        out.print(render.status_line("counters", counted, bool(report.repaired_counters)))
        if report.miscounted:
            out.print(render.miscounted_table(report.miscounted))
        totals = "; ".join(report.totals) if report.totals else None
        out.print(render.status_line("kept totals", totals, report.repaired_totals))
        if report.ok:
            out.print(Text("ok", style="bold green"))
        else:
            hint = "" if repair else "; 'hermes-store check --repair' mends counters and indexes"
            out.print(Text(f"problems found{hint}", style="bold red"))
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def optimize(
    no_vacuum: Annotated[
        bool,
        typer.Option("--no-vacuum", help="Only merge the search indexes; keep the file's size."),
    ] = False,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give space back: merge the search indexes (FTS optimize), then VACUUM the file.

    VACUUM holds the write lock while it rewrites the file (a minute or more
    on a multi-gigabyte file): agents writing meanwhile wait, and give up
    after their own patience. Run it while they are idle, or use --no-vacuum.
    """
    from hermes_store.tools.optimize import optimize as run_optimize

    target = _target(db, url, patience)
    path = target.path
    if path is None:
        raise CliError(
            "optimize works on SQLite files; on PostgreSQL run VACUUM (and, if you want "
            "statistics, ANALYZE) on the database itself"
        )
    with _open(target) as store, store.read() as uow:  # brought to the head, its layout read
        layout = uow.layout
    report = run_optimize(path, layout, vacuum=not no_vacuum, patience_s=store.policy.patience_s)
    if as_json:
        render.write_json(report.as_dict())
        return
    out.print(Text(f"{path}: {report.before_bytes / 1e6:,.1f} MB before"))
    for step in report.steps:
        out.print(
            Text(
                f"  {step.name}: {step.seconds:.1f} s, file {step.file_bytes / 1e6:,.1f} MB, "
                f"free {step.free_bytes / 1e6:,.1f} MB"
            )
        )
    for note in report.notes:
        out.print(Text(f"  note: {note}"))
    out.print(
        Text(
            f"{report.after_bytes / 1e6:,.1f} MB after: "
            f"{report.given_back_bytes / 1e6:,.1f} MB given back"
        )
    )


@app.command("backup")
def backup_(
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            help="Directory for the backups \\[default: $HERMES_HOME/backups]",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    keep: Annotated[
        int, typer.Option("--keep", min=1, help="Backups to keep; older ones are deleted.")
    ] = 3,
    db: DbOption = None,
    url: UrlOption = None,
    patience: PatienceOption = None,
) -> None:
    """Copy the store, while agents keep writing, into a verified 0600 backup; keep N."""
    from hermes_store.tools.backup import backup

    target = _target(db, url, patience)
    report = backup(target.url, to, keep=keep)
    removed = f"; removed {len(report.removed)} older backup(s)" if report.removed else ""
    out.print(
        Text(
            f"backed up {target.describe()} to {report.path} ({report.bytes / 1e6:.1f} MB, "
            f"{report.sessions} sessions, {report.messages} messages, verified, "
            f"{report.seconds:.2f} s){removed}"
        ),
        soft_wrap=True,
    )


@app.command("recover")
def recover_(
    source: Annotated[
        Path,
        typer.Option("--from", help="The damaged state.db (only read).", dir_okay=False),
    ],
    destination: Annotated[
        Path,
        typer.Option("--to", help="The new file to write (must not exist).", dir_okay=False),
    ],
    as_json: JsonOption = False,
) -> None:
    """Salvage every readable session and message of a damaged file into a new store."""
    from hermes_store.tools.recovery.recover import recover

    report = recover(source, destination)
    if as_json:
        render.write_json(asdict(report))
        return
    out.print(render.recovery_summary(report), soft_wrap=True)


def _print_damage(damage: Any) -> None:
    """The survey of a damaged file: its damaged trees, what reads, what to do."""
    out.print(render.damage_table(damage.trees))
    out.print(
        Text(
            f"readable: {damage.sessions_readable} of {damage.sessions_claimed} session(s); "
            f"{damage.messages_readable} message(s), where the counters claim "
            f"{damage.messages_claimed} and the index lists {damage.messages_indexed}"
            + (
                f" ({damage.orphan_rows} only by reading pages past the damage)"
                if damage.orphan_rows
                else ""
            )
        ),
        soft_wrap=True,
    )
    out.print(Text(f"damaged pages: {damage.next_step}", style="bold red"), soft_wrap=True)


@app.command()
def demo(db: DbOption = None, url: UrlOption = None, patience: PatienceOption = None) -> None:
    """Write a demo session with a tool call and a continuation, then search it."""
    from hermes_store.api.demo import run

    with _session_db(_target(db, url, patience), create=True) as sdb:
        code = run(sdb)
    raise typer.Exit(code)


# ----------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------
def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def _database_message(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    return f"database error: {_one_line(original if original is not None else error)}"


def fail(message: str) -> None:
    err.print(Text(f"error: {_one_line(message)}", style="bold red"), soft_wrap=True)


class _ReaderLeft(Exception):
    """stdout's reader closed the pipe (``hermes-store export | head``): nothing is wrong."""


class _PipeAwareStdout:
    """stdout, but a closed pipe raises :class:`_ReaderLeft` instead of ``BrokenPipeError``.

    Click catches ``BrokenPipeError`` itself and exits 1; a Unix tool whose
    reader left ends quietly, with status 141 (SIGPIPE) or 0. Everything else
    is the real stream's.
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


def _app_for(argv: list[str]) -> typer.Typer:
    """``app`` with only the command ``argv`` names, when it names one; else the whole ``app``.

    typer builds the click command of every registered command at each start,
    reading each function's signature and annotations: about 30 ms for the
    twenty commands, a tenth of ``import sqlalchemy``, spent to run one of
    them. A copy that holds only the named command (and the group's callback,
    so ``--version`` and usage lines stay the group's) parses and runs it the
    same way. Anything else -- no command, ``--help``, a typo -- gets the whole
    app, which lists and suggests every command.
    """
    if len(argv) < 2:
        return app
    chosen = [
        info
        for info in app.registered_commands
        if info.callback is not None
        and (info.name or typer.main.get_command_name(info.callback.__name__)) == argv[1]
    ]
    if len(chosen) != 1:
        return app
    single = copy.copy(app)
    single.registered_commands = chosen
    return single


def main() -> None:
    """Console script ``hermes-store``."""
    # Not a TextIO: it hands what it does not override to the real stream. Older
    # typeshed types sys.stdout as a plain TextIO (an error there, unused here).
    sys.stdout = _PipeAwareStdout(sys.stdout)  # type: ignore[assignment, unused-ignore]
    try:
        _app_for(sys.argv)()
    except (CliError, StoreError) as error:
        fail(str(error))
    except SQLAlchemyError as error:
        fail(_database_message(error))
    except (_ReaderLeft, BrokenPipeError):
        # The rest of the output goes nowhere, including Python's flush at exit.
        if sys.__stdout__ is not None:  # None only without a console (pythonw)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        sys.exit(141)
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        fail(f"{error.strerror or error}{where}")
    except KeyboardInterrupt:
        fail("interrupted")
        sys.exit(130)
    else:  # pragma: no cover - app() always exits through SystemExit
        return
    sys.exit(1)


if __name__ == "__main__":
    main()
