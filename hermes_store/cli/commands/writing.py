"""Commands that change sessions: prune, delete, archive, pin, title; and demo."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_store.cli.args import Command, UsageError, arg, non_negative_float
from hermes_store.cli.output import console, say, show, write_json
from hermes_store.cli.target import (
    JSON,
    SESSION_ID,
    STORE,
    Target,
    open_store,
    session_db,
    source_option,
    target_of,
)
from hermes_store.errors import SessionNotFoundError

if TYPE_CHECKING:
    from hermes_store.cli import render
else:
    from hermes_store.cli.output import lazy_render as render


def _auto_prune(
    older_than: float | None,
    source: str | None,
    dry_run: bool,
    min_interval_hours: float,
    target: Target,
    as_json: bool,
) -> None:
    if source is not None or dry_run:
        raise UsageError("--auto prunes every source for real: drop --source and --dry-run")
    with session_db(target) as sdb:
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
    target: Target,
    as_json: bool,
) -> None:
    """Delete ended sessions older than N days (pinned ones kept); children become roots.

    --auto: the upkeep a program runs at start -- prune at most every
    --min-interval-hours (default 90 days' age), then VACUUM when due.
    """
    if auto:
        _auto_prune(older_than, source, dry_run, min_interval_hours, target, as_json)
        return
    if older_than is None:
        raise UsageError("give --older-than DAYS (or --auto)")
    from hermes_store.uow.pruning import prune_in_batches

    with open_store(target) as store:
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
    target: Target,
) -> None:
    with session_db(target) as sdb:
        if flag == "archived":
            sdb.set_session_archived(session_id, not undo)
        else:
            sdb.set_session_pinned(session_id, not undo)
    done = {("archived", False): "archived", ("archived", True): "restored"}
    verb = done.get((flag, undo), "unpinned" if undo else "pinned")
    say(f"{verb} session {session_id} (and its compression chain)")


def archive(*, session_id: str, undo: bool, target: Target) -> None:
    """Hide a conversation from listings and counts (nothing is deleted); --undo restores it."""
    _flag("archived", session_id=session_id, undo=undo, target=target)


def pin(*, session_id: str, undo: bool, target: Target) -> None:
    """Keep a conversation: listed with the pinned ones, never pruned nor archived as stale."""
    _flag("pinned", session_id=session_id, undo=undo, target=target)


def delete(*, session_id: str, target: Target) -> None:
    """Delete a session and its messages; sessions split off it become roots."""
    with session_db(target) as sdb:
        if not sdb.delete_session(session_id):
            raise SessionNotFoundError(session_id)
    say(f"deleted session {session_id}")


def title(
    *,
    session_id: str,
    new_title: str | None,
    target: Target,
) -> None:
    """Print or set a session's title (unique among sessions, at most 100 characters)."""
    # Printing only reads: a file this user may only read is opened read-only.
    with session_db(target, read_only=new_title is None) as sdb:
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


def demo(*, target: Target) -> int:
    """Write a demo session with a tool call and a continuation, then search it.

    Into ./hermes-demo/state.db unless --db or --url says otherwise (never the
    agent's store by default), and never into a store holding other sessions.
    """
    from hermes_store.api.demo import DEMO_STORE, run

    if not target.named:
        target = target_of(DEMO_STORE, None, target.patience)
    with session_db(target, create=True) as sdb:
        return run(sdb)


COMMANDS = (
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
            source_option("Only sessions of this source."),
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
)
"""The commands changing sessions, in the help's order."""

DEMO = Command("demo", demo, STORE)
"""``demo``: the help lists it last, after the upkeep commands."""
