"""Our addition (schema_version stays 6): PostgreSQL keeps each word vector in its row.

``messages.content_tsv`` (revision 0014) is given ``STORAGE MAIN``: the
server compresses a large vector but moves the message's text out of the row
before it moves the vector, so a rank window's test of a row reads the row
alone (see :data:`hermes_store.backends.postgresql.word_index.VECTOR_INLINE`).
Only rows written from now on are stored so; the revision rewrites nothing
(the rows already there keep their storage until they are written again),
so it takes no time on a populated store.

On SQLite this revision does nothing.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op

from hermes_store.backends.postgresql.word_index import VECTOR_EXTENDED, VECTOR_INLINE
from hermes_store.schema.migration_ops import is_sqlite

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not is_sqlite():
        op.execute(VECTOR_INLINE)


def downgrade() -> None:
    if not is_sqlite():
        op.execute(VECTOR_EXTENDED)
