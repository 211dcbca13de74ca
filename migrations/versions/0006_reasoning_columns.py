"""Schema version 6: reasoning columns on ``messages``.

``reasoning`` is a provider's raw reasoning text; ``reasoning_details`` and
``codex_reasoning_items`` are JSON strings.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import (
    add_missing_columns,
    drop_columns,
    set_schema_version,
)

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_missing_columns(
        "messages",
        sa.Column("reasoning", sa.Text()),
        sa.Column("reasoning_details", sa.Text()),
        sa.Column("codex_reasoning_items", sa.Text()),
    )
    set_schema_version(6)


def downgrade() -> None:
    drop_columns("messages", "reasoning", "reasoning_details", "codex_reasoning_items")
    set_schema_version(5)
