"""Our addition (schema_version stays 6): the CJK pair triggers cost time linear in the text.

Revision 0009's triggers cut a text into 1,025-character pieces with
``substr(content, offset, 1025)``. SQLite finds a character offset in UTF-8
text by walking from the start, so every piece walked half the text on
average: a text of n characters cost n**2 / 2048 steps. A message of a few
MiB with a non-ASCII character took far longer to append than its size
explains (docs/design/search.md, "Short CJK terms"), all of it inside the
write transaction, so every other writer waited too.

These triggers cut from the piece above instead of from the text: pieces of
1 Mi characters from the text (a few walks of the text at most), then 32 Ki
from those, 1 Ki, 33 characters, and the pairs from each short piece. Each
level walks only within its parent, so a text costs a fixed number of
steps per character at every level. A piece with no pair of CJK characters
anywhere (``GLOB '*[..][..]*'``, one pass) is not cut further, so accented
Latin text or emoji -- non-ASCII, but with no pair -- pays one scan per
level instead of one row per character.

The pairs written are the same as 0009's (each piece overlaps the next by one
character, as there), so nothing is back-filled: the index stays as it is and
only the three triggers are replaced. Files of the agent's own versions never
run our revisions; on PostgreSQL this revision does nothing.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import context, op

from hermes_store.domain.bigrams import GLOB_CLASS
from hermes_store.schema.bigram_index import pair_triggers
from hermes_store.schema.migration_ops import is_sqlite

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

PAIR = f"{GLOB_CLASS}{GLOB_CLASS}"

# One level of the cut: pieces of ``size + 1`` characters at every ``size`` of
# {parent}.piece, only where the parent holds a pair at all. LIMIT -1 keeps
# each level a materialized subquery (not flattened into one long substr).
LEVEL = """SELECT substr({parent}.piece, {n}.n * {size} + 1, {size} + 1) AS piece FROM ({inner}
    LIMIT -1) AS {parent}, messages_cjk_positions {n}
    WHERE {n}.n < 32 AND {n}.n * {size} <= length({parent}.piece) - 2
      AND {parent}.piece GLOB '*{pair}*'"""

TOP = """SELECT substr({text}, a.n * 1048576 + 1, 1048577) AS piece
    FROM messages_cjk_positions a WHERE a.n <= (length({text}) - 2) / 1048576"""
"""Pieces of 1 Mi characters (+1) straight from the text: up to 2**30 characters."""


def grams(text: str) -> str:
    """The distinct CJK pairs of ``text`` (an SQL expression), one per row, as ``gram``."""
    pieces = TOP.format(text=text)
    for parent, n, size in (("i", "b", 32768), ("j", "c", 1024), ("k", "r", 32)):
        pieces = LEVEL.format(parent=parent, n=n, size=size, inner=pieces, pair=PAIR)
    return f"""SELECT DISTINCT substr(s.piece, q.n + 1, 2) AS gram FROM ({pieces}
    LIMIT -1) AS s, messages_cjk_positions q
WHERE q.n < 32 AND q.n <= length(s.piece) - 2
  AND substr(s.piece, q.n + 1, 2) GLOB '{PAIR}'"""


TRIGGERS = pair_triggers(grams)


def _replace(triggers: dict[str, str]) -> None:
    """Replace the triggers the file has; one that is missing stays missing.

    A file that lost one of them has a stale index, which the layout then
    refuses to read (it wants all three); adding the trigger back would make
    the stale pairs look kept.
    """
    present = set(triggers)
    if not context.is_offline_mode():
        rows = op.get_bind().exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        )
        present &= {str(name) for (name,) in rows}
    for name in present:
        op.execute(f"DROP TRIGGER {name}")
        op.execute(triggers[name])


def upgrade() -> None:
    if is_sqlite():
        _replace(TRIGGERS)


def downgrade() -> None:
    """Back to 0009's triggers, as that revision wrote them."""
    if is_sqlite():
        _replace(context.script.get_revision("0009").module.TRIGGERS)
