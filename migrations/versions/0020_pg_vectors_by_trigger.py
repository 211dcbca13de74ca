"""Our addition (schema_version stays 6): PostgreSQL's word vectors kept by a trigger everywhere.

Revision 0014 first made ``messages.content_tsv`` a stored generated column,
whose adding rewrites the table under an exclusive lock; it now adds a plain
column kept by a trigger (see :mod:`hermes_store.backends.postgresql.word_index`).
A deployment that ran the first form is given the second here, so every
store at head has one schema: ``DROP EXPRESSION`` turns the generated column
into a plain one keeping its values (no rewrite), and the trigger keeps it
from then on. A store whose column is already plain is left as it is.

On SQLite this revision does nothing.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from hermes_store.backends.postgresql.word_index import (
    DROP_VECTOR_EXPRESSION,
    DROP_VECTOR_TRIGGER,
    GLUED_VECTOR_FUNCTION_DDL,
    IS_GENERATED,
    VECTOR_TRIGGER_DDL,
)
from hermes_store.schema.migration_ops import is_sqlite

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if is_sqlite() or not op.get_bind().execute(text(IS_GENERATED)).scalar():
        return
    op.execute(DROP_VECTOR_EXPRESSION)
    op.execute(GLUED_VECTOR_FUNCTION_DDL)
    op.execute(DROP_VECTOR_TRIGGER)
    op.execute(VECTOR_TRIGGER_DDL)


def downgrade() -> None:
    """Nothing: the trigger-kept column is what revision 0014 makes now, valid at 0019."""
