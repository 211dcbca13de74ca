"""What ``check`` says about a damaged file: which tables and indexes, how much still reads.

The survey reads pages like a salvage does, but of a live file: so it first
takes a consistent snapshot with SQLite's backup API (which copies pages as
they are, damaged ones included, as of one commit, while agents go on
writing) into a scratch folder beside the file, and surveys that. The
file itself is only read; the snapshot is deleted afterwards, or, when the
run is killed, by the next run (:mod:`~hermes_store.tools.recovery.scratch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreError
from hermes_store.tools.disk import require_free_space
from hermes_store.tools.recovery.salvage import TreeReport, salvage
from hermes_store.tools.recovery.scratch import scratch_folder

SCRATCH_PREFIX = ".hermes-check-"


@dataclass
class DamageSurvey:
    trees: list[TreeReport] = field(default_factory=list)
    """The damaged tables and indexes only."""
    sessions_readable: int = 0
    sessions_claimed: int = 0
    messages_readable: int = 0
    messages_claimed: int = 0
    """What the readable sessions' ``message_count`` counters add up to."""
    messages_indexed: int = 0
    orphan_rows: int = 0
    """Readable messages that SQL cannot reach (under a damaged interior page)."""
    next_step: str = ""


class SurveyError(StoreError):
    """The damaged file could not be surveyed (no room for its snapshot, say)."""


def survey(path: Path) -> DamageSurvey:
    """Survey the damage of the SQLite file ``path`` through a snapshot of it."""
    needed = path.stat().st_size + _size(Path(f"{path}-wal"))
    require_free_space(path.parent, needed, "the damage survey's snapshot", SurveyError)
    with scratch_folder(path.parent, SCRATCH_PREFIX) as scratch:
        snapshot = scratch / "snapshot.db"
        source = sqlite3.connect(path)
        target = sqlite3.connect(snapshot)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        found = salvage(snapshot)
    return DamageSurvey(
        trees=[tree for tree in found.trees if tree.damaged],
        sessions_readable=len(found.sessions),
        sessions_claimed=len(found.claimed_session_ids),
        messages_readable=len(found.messages),
        messages_claimed=found.counted_messages,
        messages_indexed=len(found.indexed_message_ids),
        orphan_rows=found.orphan_rows,
        next_step=(
            "stop the agents, keep this file, then restore your latest backup or salvage it: "
            f"hermes-store recover --from {path} --to NEW.db"
        ),
    )


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
