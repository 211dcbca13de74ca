"""Our addition (schema_version stays 6): PostgreSQL finds a title lineage by an index.

A lineage is the sessions titled ``base`` or ``base #<anything>``; on
PostgreSQL ``SessionRepository`` asks ``title LIKE 'base #%'``. A b-tree
with the database's collation cannot answer a ``LIKE`` prefix unless the
collation is ``C`` (a ``C.UTF-8`` database is not, to the planner), so
every lineage question scanned ``sessions`` (issue #28), at a cost growing
with their number. ``idx_sessions_title_pattern`` is on
``title text_pattern_ops``, the operator class that compares characters
code by code whatever the collation, which the planner turns a ``LIKE``
prefix into a range of; ``started_at`` and ``id`` are included, so a
lineage is read from the index alone.

On SQLite this revision does nothing: there the lineage is already a range
of the unique title index (BINARY collation).

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

from hermes_store.schema.migration_ops import is_sqlite

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

INDEX = "idx_sessions_title_pattern"
PG_INDEX_DDL = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON sessions (title text_pattern_ops) "
    "INCLUDE (started_at, id) WHERE title IS NOT NULL"
)


def upgrade() -> None:
    if not is_sqlite():
        op.execute(PG_INDEX_DDL)


def downgrade() -> None:
    if not is_sqlite():
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
