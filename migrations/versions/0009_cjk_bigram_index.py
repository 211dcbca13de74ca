"""Our addition (schema_version stays 6): an index of CJK character pairs for short terms.

The trigram index (0007) cannot answer a term of two characters -- most
two-character Chinese words, most Korean words -- so such a search scanned
every message with ``LIKE '%term%'`` (seconds at a million messages). This
revision keeps, for every message whose text holds a pair of adjacent CJK
characters, one row per distinct such pair in ``messages_cjk_bigrams``;
a search then reads the messages under one pair of its term, newest first,
and the ``LIKE`` test decides on those alone (recall equal to the scan: see
:mod:`hermes_store.domain.bigrams`).

It is kept by three triggers on ``messages`` written in plain SQL (substr,
GLOB, length: no extension, no tokenizer), which live in the file and so run
for every program that writes it, the agent's own code included. Triggers
allow no ``WITH`` clause, so the character positions come from
``messages_cjk_positions`` (the numbers 0..1023), joined three levels deep:
a text is cut into 1,025-character pieces, those into 33-character ones,
and each pair is read from the short piece, so each ``substr`` walks a few
characters instead of the whole text (SQLite reads UTF-8 text from the
start). Only text with a non-ASCII character (``length(CAST(content AS
BLOB)) > length(content)``, a byte count against a character count) is
looked at at all, so a Latin message costs one comparison.

A file of the agent's own schema versions never runs our revisions (see
:func:`hermes_store.schema.migrate.is_agent_file`), so it never gets these
objects; where they are missing, search keeps its ``LIKE`` scan. On
PostgreSQL this revision does nothing: pg_trgm serves its substring search.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import context, op

from hermes_store.domain.bigrams import GLOB_CLASS
from hermes_store.schema.bigram_index import (
    HAS_PAIRS,
    driver_connection,
    fill_bigrams,
    pair_triggers,
)
from hermes_store.schema.migration_ops import is_sqlite

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

POSITIONS = """
CREATE TABLE IF NOT EXISTS messages_cjk_positions (n INTEGER PRIMARY KEY)
"""
FILL_POSITIONS = """
INSERT OR IGNORE INTO messages_cjk_positions (n)
WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n < 1023)
SELECT n FROM k
"""
TABLE = """
CREATE TABLE IF NOT EXISTS messages_cjk_bigrams (
    gram TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    PRIMARY KEY (gram, message_id)
) WITHOUT ROWID
"""

# The distinct CJK pairs of {text}, one per row (as "gram"): pieces of 1,025
# characters at every 1,024 (two levels of positions: up to 2**30 characters),
# pieces of 33 at every 32 of those, and a pair at each position of the short
# piece; the overlap of one character keeps the pairs that straddle a cut.
# LIMIT -1 keeps each piece a materialized subquery (not flattened back into
# one long substr per pair).
GRAMS = f"""
SELECT DISTINCT substr(short.piece, q.n + 1, 2) AS gram FROM (
    SELECT substr(long.piece, r.n * 32 + 1, 33) AS piece FROM (
        SELECT substr({{text}}, 1 + a.n * 1048576 + b.n * 1024, 1025) AS piece
        FROM messages_cjk_positions a, messages_cjk_positions b
        WHERE a.n <= (length({{text}}) - 2) / 1048576
          AND b.n <= (length({{text}}) - 2 - a.n * 1048576) / 1024
        LIMIT -1) AS long,
        messages_cjk_positions r
    WHERE r.n < 32 AND r.n * 32 <= length(long.piece) - 2
    LIMIT -1) AS short,
    messages_cjk_positions q
WHERE q.n < 32 AND q.n <= length(short.piece) - 2
  AND substr(short.piece, q.n + 1, 2) GLOB '{GLOB_CLASS}{GLOB_CLASS}'
"""


def has_pairs(text: str) -> str:
    """The cheap test first: the back-fill's own (any non-ASCII character), on ``text``."""
    return HAS_PAIRS.format(text=text)


TRIGGERS = pair_triggers(lambda text: GRAMS.format(text=text))

OFFLINE_BACKFILL = f"UPDATE messages SET id = id WHERE {has_pairs('content')}"
"""For ``--sql`` output: each such row passes through the update trigger (and, harmlessly,
the FTS ones, which delete and re-add the same text)."""


def backfill() -> None:
    """Index the rows already there (:func:`hermes_store.schema.bigram_index.fill_bigrams`)."""
    if context.is_offline_mode():
        op.execute(OFFLINE_BACKFILL)
        return
    fill_bigrams(driver_connection(op.get_bind()))


def upgrade() -> None:
    if not is_sqlite():
        return
    op.execute(POSITIONS)
    op.execute(FILL_POSITIONS)
    op.execute(TABLE)
    for ddl in TRIGGERS.values():
        op.execute(ddl)
    backfill()


def downgrade() -> None:
    if not is_sqlite():
        return
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS messages_cjk_bigrams")
    op.execute("DROP TABLE IF EXISTS messages_cjk_positions")
