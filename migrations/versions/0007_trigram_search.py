"""Our addition (schema_version stays 6): a trigram FTS5 index over ``messages.content``.

FTS5's default unicode61 tokenizer treats a run of Chinese, Japanese or
Korean characters (with any Latin letters glued to it) as one token, so a
word inside running CJK text cannot be found. A second external-content
index with the ``trigram`` tokenizer matches any substring of three or more
characters. It has its own three triggers and is back-filled here from the
existing rows. The old ``sqlite3`` code ignores tables it does not know.

``schema_version`` is left at 6: the agent's own store numbers its versions
after 6 with meanings of its own (its 7 adds ``messages.reasoning_content``),
and a file stamped 7 here would make its code skip that step. Releases of
hermes_store before 0008 did stamp 7; revision 0008 takes that back. The
agent's version 10 keeps this table (it only creates a trigram table that is
missing), its version 11 replaces it with its own inline one, and its
version 23+ keeps it until its storage optimisation is run.

On PostgreSQL the same revision enables ``pg_trgm`` and builds a trigram GIN
index on ``messages.content``, which serves ``content ILIKE '%term%'`` for
any substring (CJK included); PostgreSQL keeps it in step by itself. The
downgrade drops the index but leaves the extension, which other schemas of
the database may use.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

from hermes_store.schema.migration_ops import is_sqlite

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content,
    content=messages,
    content_rowid=id,
    tokenize='trigram'
)
"""

TRIGGERS = {
    "messages_fts_trigram_insert": """
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END
""",
    "messages_fts_trigram_delete": """
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
END
""",
    "messages_fts_trigram_update": """
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END
""",
}


PG_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
PG_INDEX = (
    "CREATE INDEX IF NOT EXISTS idx_messages_content_trgm ON messages "
    "USING GIN (content gin_trgm_ops)"
)


def upgrade() -> None:
    if is_sqlite():
        op.execute(TABLE)
        for ddl in TRIGGERS.values():
            op.execute(ddl)
        op.execute("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('rebuild')")
    else:
        op.execute(PG_EXTENSION)
        op.execute(PG_INDEX)


def downgrade() -> None:
    if is_sqlite():
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS messages_fts_trigram")
    else:
        op.execute("DROP INDEX IF EXISTS idx_messages_content_trgm")
