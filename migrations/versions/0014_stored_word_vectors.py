"""Our addition (schema_version stays 6): PostgreSQL keeps each message's tsvector.

Issue #28 found PostgreSQL search at field size spending most of its time
re-parsing the text of every match, because revision 0001's
GIN index is on an expression and stores no vector: ``ts_rank`` and the
position check of a phrase parse the content again for each row. This
revision adds the generated column ``messages.content_tsv`` (the same
expression, stored) and rebuilds ``idx_messages_fts`` on it, so ranking and
phrases read stored positions, and adds ``idx_messages_role``, so a search's
role filter narrows the oldest rank window before its rows are read (see
:mod:`hermes_store.backends.postgresql.word_index`).

Adding a stored generated column rewrites ``messages`` under an exclusive
lock: writers wait for the rewrite and the index build (the PostgreSQL guide,
docs/guides/postgresql.md, gives the time it took).

On SQLite this revision does nothing: FTS5 stores its own positions.

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from alembic import op

from hermes_store.backends.postgresql.word_index import (
    ADD_VECTOR_COLUMN,
    DROP_VECTOR_COLUMN,
    EXPRESSION_INDEX_DDL,
    ROLE_INDEX,
    ROLE_INDEX_DDL,
    WORD_INDEX,
    WORD_INDEX_DDL,
)
from hermes_store.schema.migration_ops import is_sqlite

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if is_sqlite():
        return
    op.execute(f"DROP INDEX IF EXISTS {WORD_INDEX}")
    op.execute(ADD_VECTOR_COLUMN)
    op.execute(WORD_INDEX_DDL)
    op.execute(ROLE_INDEX_DDL)


def downgrade() -> None:
    if is_sqlite():
        return
    op.execute(f"DROP INDEX IF EXISTS {ROLE_INDEX}")
    op.execute(f"DROP INDEX IF EXISTS {WORD_INDEX}")
    op.execute(DROP_VECTOR_COLUMN)
    op.execute(EXPRESSION_INDEX_DDL)
