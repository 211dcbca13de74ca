"""Commands that look after the file: ``check``, ``optimize``, ``backup``, ``recover``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_store.cli.args import Command, arg, directory_path, file_path, positive_int
from hermes_store.cli.output import say, show, write_json
from hermes_store.cli.target import JSON, STORE, Target, open_store
from hermes_store.errors import SchemaError, StoreCorruptError

if TYPE_CHECKING:
    from hermes_store.cli import render
else:
    from hermes_store.cli.output import lazy_render as render


def check(
    *,
    repair: bool,
    target: Target,
    as_json: bool,
) -> int | None:
    """Check integrity, foreign keys, the search indexes and the counters; exit 1 if not healthy."""
    from hermes_store.backends.sqlite.short_file import is_empty_file, refuse_short_file
    from hermes_store.tools.check import check as run_check

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
        with open_store(target, migrate=False, read_only=not repair) as store:
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
    target: Target,
    as_json: bool,
) -> None:
    """Give space back: merge the search indexes (FTS optimize), then VACUUM the file.

    VACUUM holds the write lock while it rewrites the file (a minute or more
    on a multi-gigabyte file): agents writing meanwhile wait, and give up
    after their own patience. Run it while they are idle, or use --no-vacuum.
    """
    from hermes_store.tools.optimize import optimize as run_optimize
    from hermes_store.uow import upkeep

    path = target.path
    if path is None:  # a server: VACUUM (ANALYZE) through its backend, recorded the same way
        with open_store(target) as store:
            if not no_vacuum:
                upkeep.vacuum(store)
        if as_json:
            write_json({"vacuumed": not no_vacuum})
        else:
            say("vacuumed and analyzed" if not no_vacuum else "nothing to merge on PostgreSQL")
        return
    with open_store(target) as store:  # brought to the head, its layout read
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


def backup_(*, to: Path | None, keep: int, target: Target) -> None:
    """Copy the store, while agents keep writing, into a verified 0600 backup; keep N."""
    from hermes_store.tools.backup import backup

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


COMMANDS = (
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
)
"""The upkeep commands, in the help's order."""
