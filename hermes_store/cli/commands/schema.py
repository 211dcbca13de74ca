"""The schema's commands: ``upgrade`` brings the store to the head, ``current`` says where it is."""

from __future__ import annotations

import os
import sys
import time

from hermes_store.cli.args import Command
from hermes_store.cli.output import say, write_json
from hermes_store.cli.target import JSON, STORE, Target, open_store, state
from hermes_store.errors import SchemaError
from hermes_store.schema.state import HEAD_REVISION, Ladder, ladder_of


def upgrade(*, target: Target) -> None:
    """Bring the store to the head schema: create it, or adopt and upgrade an old state.db."""
    existed = target.exists() and (target.path is None or target.path.stat().st_size > 0)
    if existed and not _writable(target) and _at_head(target):
        return

    def stepped(revision: str, what: str, seconds: float) -> None:
        say(f"upgrade {revision}: {what} ({seconds:.1f} s)", stderr=True)
        sys.stderr.flush()

    started = time.perf_counter()
    with open_store(target, create=True, migrate=False) as store:
        before = state(store) if existed else (None, None)
        store.upgrade_to_head(on_step=stepped)
        after = state(store)
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
        with open_store(target, read_only=True) as store:
            version, revision = state(store)
            ours = store.ladder is not Ladder.AGENT  # the agent's may need a column mended
    except SchemaError:  # no store in it yet: the writable open says what it is
        return False
    if not ours or revision != HEAD_REVISION:
        return False
    say(f"{target.describe()}: already at head (schema version {version}, revision {revision})")
    return True


def current(*, target: Target, as_json: bool) -> None:
    """Print the schema version and the Alembic revision of the store (changes nothing)."""
    with open_store(target, read_only=True) as store:
        version, revision = state(store)
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


COMMANDS = (
    Command("upgrade", upgrade, STORE),
    Command("current", current, (*STORE, JSON)),
)
"""The schema commands, in the help's order."""
