"""Schema version 3: add ``sessions.title``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hermes_store.schema.migration_ops import (
    add_missing_columns,
    drop_columns,
    set_schema_version,
)

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_missing_columns("sessions", sa.Column("title", sa.Text()))
    set_schema_version(3)


def downgrade() -> None:
    # SQLite refuses to drop an indexed column; 0004's downgrade normally took
    # the index already, but a stamped file may still carry it.
    op.execute("DROP INDEX IF EXISTS idx_sessions_title_unique")
    drop_columns("sessions", "title")
    set_schema_version(2)
