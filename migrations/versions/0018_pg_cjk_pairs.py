"""Our addition (schema_version stays 6): PostgreSQL gets SQLite's CJK pair index.

``messages_cjk_bigrams`` (gram, message_id), kept by triggers on
``messages`` and filled from the rows already there, as revision 0009 made
it for SQLite; search then bounds a CJK term of two or more characters by
the messages under its rarest pair instead of pg_trgm's trigram walk (see
:mod:`hermes_store.backends.postgresql.cjk_pairs`).

On SQLite this revision does nothing: revision 0009 made the index there.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

from hermes_store.backends.postgresql.cjk_pairs import create_statements, drop_statements
from hermes_store.schema.migration_ops import is_sqlite

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if is_sqlite():
        return
    for statement in create_statements():
        op.execute(statement)


def downgrade() -> None:
    if is_sqlite():
        return
    for statement in drop_statements():
        op.execute(statement)
