"""Schema version 4: unique partial index on ``sessions.title``.

NULL titles may repeat; any non-NULL title belongs to one session only.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

from hermes_store.schema.migration_ops import set_schema_version

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
        "ON sessions(title) WHERE title IS NOT NULL"
    )
    set_schema_version(4)


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_sessions_title_unique")
    set_schema_version(3)
