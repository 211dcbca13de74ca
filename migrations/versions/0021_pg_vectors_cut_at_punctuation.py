"""Our addition (schema_version stays 6): PostgreSQL's word vectors cut at punctuation as FTS5 cuts.

PostgreSQL's parser reads ``src/recvworkerread.sql``, ``a.b@c.io``, ``v1.2``
or ``1.5`` as one token, which FTS5 reads as its pieces; a search for a
piece, or for a path as FTS5 answers it, found nothing in the word index and
fell to the substring route (issue #28). The trigger function now makes each
vector from the text with its ASCII punctuation turned into spaces
(:func:`hermes_store.backends.postgresql.word_index.vector_of`), and every
stored vector is rewritten to it.

On a table that holds messages the rewrite does not block appends: the
function is replaced first (new and edited rows get the new vector from it),
then the vectors are rewritten in committed ranges of ids on a second
connection (:func:`hermes_store.backends.postgresql.vector_fill.rewrite_vectors`,
the machinery of revision 0014), only the rows whose vector changes being
written; the GIN index takes the new entries as the rows are written. The
revision is recorded when the rewrite is done; a run that failed part-way
is finished by running it again. ``ANALYZE`` then gives the planner the new
words' statistics (it estimates a word's matches from them). The index is
not rebuilt, and the old row versions are left to autovacuum: a ``VACUUM``
beside the migration's open transaction could not remove them (see the
design notes, "Search at field size"). The downgrade puts the old function
and vectors back the same way.

On SQLite this revision does nothing: FTS5 already cuts there.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from collections.abc import Callable

from alembic import op
from sqlalchemy import text

from hermes_store.backends.postgresql.vector_fill import (
    beside_migration,
    rewrite_all,
    rewrite_vectors,
)
from hermes_store.backends.postgresql.word_index import (
    GLUED_VECTOR_FUNCTION_DDL,
    VECTOR_FUNCTION_DDL,
    glued_vector_of,
    vector_of,
)
from hermes_store.schema.migration_ops import is_sqlite

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not is_sqlite():
        _give_vectors(VECTOR_FUNCTION_DDL, vector_of)


def downgrade() -> None:
    if not is_sqlite():
        _give_vectors(GLUED_VECTOR_FUNCTION_DDL, glued_vector_of)


def _give_vectors(function_ddl: str, vector: Callable[[str], str]) -> None:
    """Make the trigger set ``vector``, then rewrite every stored vector that differs.

    Beside the migration's transaction when it has not touched ``messages``
    yet (appends go on); in it otherwise (a chain run in one transaction).
    """
    with beside_migration(op.get_bind()) as beside:
        if beside is not None:
            beside.execute(text(function_ddl))
            rewrite_vectors(beside, vector=vector)
            beside.execute(text("ANALYZE messages"))
            return
    op.execute(function_ddl)
    op.execute(rewrite_all(vector))
    op.execute("ANALYZE messages")
