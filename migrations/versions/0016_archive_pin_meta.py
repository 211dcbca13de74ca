"""Our addition (schema_version stays 6): archived and pinned sessions, the agent's ``state_meta``.

``sessions.archived`` and ``sessions.pinned`` are the agent's own columns,
named and typed as its schema 25 declares them (``INTEGER NOT NULL DEFAULT
0``), so a file this store wrote reads as the agent's and its code finds the
flags it expects; ``state_meta`` is the agent's key/value table (``key TEXT
PRIMARY KEY, value TEXT``), which both programs share for their upkeep marks.

Indexes, so that the default listing and count (archived left out) cost what
they cost before the flags:

* ``idx_sessions_live_roots_listing`` and ``idx_sessions_live_roots_source_listing``:
  revision 0011's partial indexes of root sessions, restricted to those not
  archived -- a default listing page walks one and skips its OFFSET without
  reading a row;
* ``idx_sessions_archived`` on ``source`` where ``archived <> 0``: the few
  archived sessions, so a count of the others is the whole count less these;
* ``idx_sessions_pinned`` on ``started_at`` where ``pinned <> 0``: the pinned
  sessions a first listing page adds.

The same DDL on both backends (a partial index is both SQLite's and
PostgreSQL's). ``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hermes_store.schema.migration_ops import add_missing_columns, drop_columns

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

INDEXES = {
    "idx_sessions_live_roots_listing": (
        "sessions (started_at DESC, source, id, parent_session_id) "
        "WHERE parent_session_id IS NULL AND archived = 0"
    ),
    "idx_sessions_live_roots_source_listing": (
        "sessions (source, started_at DESC, id, parent_session_id) "
        "WHERE parent_session_id IS NULL AND archived = 0"
    ),
    "idx_sessions_archived": "sessions (source) WHERE archived <> 0",
    "idx_sessions_pinned": "sessions (started_at DESC) WHERE pinned <> 0",
}
STATE_META_DDL = "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT)"


def upgrade() -> None:
    add_missing_columns(
        "sessions",
        sa.Column("archived", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("pinned", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.execute(STATE_META_DDL)
    for name, target in INDEXES.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS state_meta")
    drop_columns("sessions", "archived", "pinned")
