"""Schema version 5: billing columns on ``sessions``.

Cache and reasoning token counters (``DEFAULT 0`` like the other counters),
the billing provider, URL and mode, estimated and actual cost, and where the
cost figure came from.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import DOUBLE_PRECISION

from hermes_store.schema.migration_ops import (
    add_missing_columns,
    drop_columns,
    set_schema_version,
)

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    zero = sa.text("0")
    money = sa.REAL().with_variant(DOUBLE_PRECISION(), "postgresql")  # PostgreSQL REAL: 4 bytes
    add_missing_columns(
        "sessions",
        sa.Column("cache_read_tokens", sa.Integer(), server_default=zero),
        sa.Column("cache_write_tokens", sa.Integer(), server_default=zero),
        sa.Column("reasoning_tokens", sa.Integer(), server_default=zero),
        sa.Column("billing_provider", sa.Text()),
        sa.Column("billing_base_url", sa.Text()),
        sa.Column("billing_mode", sa.Text()),
        sa.Column("estimated_cost_usd", money),
        sa.Column("actual_cost_usd", money),
        sa.Column("cost_status", sa.Text()),
        sa.Column("cost_source", sa.Text()),
        sa.Column("pricing_version", sa.Text()),
    )
    set_schema_version(5)


def downgrade() -> None:
    drop_columns(
        "sessions",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "billing_provider",
        "billing_base_url",
        "billing_mode",
        "estimated_cost_usd",
        "actual_cost_usd",
        "cost_status",
        "cost_source",
        "pricing_version",
    )
    set_schema_version(4)
