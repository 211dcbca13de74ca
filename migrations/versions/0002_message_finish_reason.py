"""Schema version 2: add ``messages.finish_reason``.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import (
    add_missing_columns,
    drop_columns,
    set_schema_version,
)

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_missing_columns("messages", sa.Column("finish_reason", sa.Text()))
    set_schema_version(2)


def downgrade() -> None:
    drop_columns("messages", "finish_reason")
    set_schema_version(1)
