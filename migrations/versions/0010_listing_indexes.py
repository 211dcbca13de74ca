"""Our addition (schema_version stays 6): indexes for listings and reports at 50,000 sessions.

On issue #19's file of 50,000 sessions each statement of the session
listings and reports scanned the ``sessions`` table -- rows that
carry whole system prompts, so a scan reads hundreds of megabytes. Each
index below lets one of them read a few pages instead:

* ``idx_sessions_listing`` (started_at DESC, parent_session_id, source, id):
  a listing page at any OFFSET walks only this index (no row look-ups for
  the skipped entries), with or without children, with excluded sources;
* ``idx_sessions_source_listing`` (source, started_at DESC,
  parent_session_id, id): the same for a listing of one source;
* ``idx_sessions_title_family`` (title, started_at, id) of titled sessions:
  title resolution and lineage numbering read a lineage's titles (a range of
  the index, see ``SessionRepository``) without visiting its rows;
* ``idx_sessions_usage`` (model, input_tokens, output_tokens,
  estimated_cost_usd): ``token_usage_by_model`` groups from the index alone;
* ``idx_sessions_total_tokens`` on ``CAST(input_tokens AS BIGINT) + output_tokens``,
  descending: ``top_sessions_by_tokens`` reads the first N entries. Widened
  before the sum: PostgreSQL's counters are 32-bit ``INTEGER``, and an index
  whose expression overflows refuses the write of two counters that fit
  (SQLite's integers are 64-bit already; the cast costs it nothing).
  PostgreSQL sorts NULL first in a descending index, so there it says
  ``DESC NULLS LAST``, the order of the query.

Indexes are invisible to other programs: the old ``sqlite3`` code and the
agent's own migrations neither read nor mind them. Like revision 0007's
trigram index, they come with our revisions only, so a file the agent's code
moved to its own schema versions does not get them (no revision runs on
such a file; its queries still work, at the old speed).

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

from hermes_store.schema.migration_ops import is_sqlite

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMN_INDEXES = {
    "idx_sessions_listing": "sessions (started_at DESC, parent_session_id, source, id)",
    "idx_sessions_source_listing": "sessions (source, started_at DESC, parent_session_id, id)",
    "idx_sessions_title_family": "sessions (title, started_at, id) WHERE title IS NOT NULL",
    "idx_sessions_usage": "sessions (model, input_tokens, output_tokens, estimated_cost_usd)",
}
TOTAL_TOKENS = "idx_sessions_total_tokens"
TOTAL_TOKENS_ORDER = {"sqlite": "DESC", "postgresql": "DESC NULLS LAST"}


def upgrade() -> None:
    for name, target in COLUMN_INDEXES.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")
    order = TOTAL_TOKENS_ORDER["sqlite" if is_sqlite() else "postgresql"]
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {TOTAL_TOKENS} "
        f"ON sessions ((CAST(input_tokens AS BIGINT) + output_tokens) {order})"
    )


def downgrade() -> None:
    for name in (*COLUMN_INDEXES, TOTAL_TOKENS):
        op.execute(f"DROP INDEX IF EXISTS {name}")
