"""Our addition (schema_version stays 6): PostgreSQL keeps each message's tsvector.

Issue #28 found PostgreSQL search at field size spending most of its time
re-parsing the text of every match, because revision 0001's
GIN index is on an expression and stores no vector: ``ts_rank`` and the
position check of a phrase parse the content again for each row. This
revision adds the column ``messages.content_tsv`` (the same expression,
stored, kept by a trigger) and builds ``idx_messages_fts`` on it, so ranking
and phrases read stored positions, and adds ``idx_messages_role``, so a
search's role filter narrows the oldest rank window before its rows are read
(see :mod:`hermes_store.backends.postgresql.word_index`).

On a table that holds messages the revision does not block appends: the
column is added without a rewrite, the rows already there get their vectors
in committed batches and the indexes are built ``CONCURRENTLY``
(:mod:`hermes_store.backends.postgresql.vector_fill`), all on a second
connection while the migration's transaction waits; the revision is recorded
only when that work is done, and a run that failed part-way is finished by
running it again. An empty table (a new store) gets all of it in the
migration's one transaction.

On SQLite this revision does nothing: FTS5 stores its own positions.

The vector is the one this revision first made (PostgreSQL's parser on the
text as it is); revision 0021 replaces it with the one cut at punctuation.

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.postgresql.vector_fill import (
    beside_migration,
    build_concurrently,
    drop_concurrently,
    fill_vectors,
)
from hermes_store.backends.postgresql.word_index import (
    ADD_VECTOR_COLUMN,
    DROP_VECTOR_COLUMN,
    DROP_VECTOR_FUNCTION,
    DROP_VECTOR_TRIGGER,
    EXPRESSION_INDEX_DDL,
    GLUED_VECTOR_FUNCTION_DDL,
    HAS_VECTOR_TRIGGER,
    NEW_WORD_INDEX,
    ROLE_INDEX,
    ROLE_INDEX_DDL,
    VECTOR_COLUMN,
    VECTOR_TRIGGER_DDL,
    WORD_INDEX,
    WORD_INDEX_DDL,
    glued_vector_of,
)
from hermes_store.schema.migration_ops import is_sqlite

HOLDS_ROWS = "SELECT EXISTS (SELECT 1 FROM messages)"

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if is_sqlite():
        return
    with beside_migration(op.get_bind()) as beside:
        if beside is not None and beside.execute(text(HOLDS_ROWS)).scalar():
            _fill_and_index(beside)
            return
    op.execute(ADD_VECTOR_COLUMN)
    op.execute(GLUED_VECTOR_FUNCTION_DDL)
    op.execute(DROP_VECTOR_TRIGGER)
    op.execute(VECTOR_TRIGGER_DDL)
    op.execute(f"DROP INDEX IF EXISTS {WORD_INDEX}")
    op.execute(WORD_INDEX_DDL)
    op.execute(ROLE_INDEX_DDL)


def _fill_and_index(connection: Connection) -> None:
    """A populated table's path, on a second connection in autocommit mode.

    Each statement commits on its own, so appends wait only for the moments
    ``ALTER TABLE`` and ``CREATE TRIGGER`` hold their locks; the migration's
    own transaction, which holds the schema upgrade lock and records the
    revision, stays open meanwhile and commits last.
    """
    connection.execute(text(ADD_VECTOR_COLUMN))
    connection.execute(text(GLUED_VECTOR_FUNCTION_DDL))
    if not connection.execute(text(HAS_VECTOR_TRIGGER)).scalar():
        connection.execute(text(VECTOR_TRIGGER_DDL))
    fill_vectors(connection, vector=glued_vector_of)
    build_concurrently(connection, NEW_WORD_INDEX, f"ON messages USING GIN ({VECTOR_COLUMN})")
    build_concurrently(connection, ROLE_INDEX, "ON messages (role)")
    drop_concurrently(connection, WORD_INDEX)
    connection.execute(text(f"ALTER INDEX {NEW_WORD_INDEX} RENAME TO {WORD_INDEX}"))


def downgrade() -> None:
    if is_sqlite():
        return
    op.execute(f"DROP INDEX IF EXISTS {ROLE_INDEX}")
    op.execute(f"DROP INDEX IF EXISTS {WORD_INDEX}")
    op.execute(DROP_VECTOR_TRIGGER)
    op.execute(DROP_VECTOR_FUNCTION)
    op.execute(DROP_VECTOR_COLUMN)
    op.execute(EXPRESSION_INDEX_DDL)
