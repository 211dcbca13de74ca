"""Our addition (schema_version stays 6): kept totals and a listing index of root sessions.

Issue #19 asks for the reports and listings at 50,000 sessions and a
million messages within 5 ms; three of them could not get there by
reading an index, because they read all of it:

* ``message_count()`` counted a million index entries;
* ``token_usage_by_model()`` grouped 50,000 entries of revision 0010's
  covering index;
* ``list_sessions_rich`` at a deep OFFSET walked every entry before the
  offset, testing each one for ``parent_session_id IS NULL``.

The first two are now kept, in ``message_total`` (one row) and
``model_usage_totals`` (one row per model), by triggers in plain SQL that
run for every program writing the file (see
:mod:`hermes_store.schema.totals`: what they keep, when a reader trusts
them, why costs are a compensated sum). They are back-filled here from the
rows already stored.

The third gets ``idx_sessions_roots_listing`` (started_at DESC, source, id,
parent_session_id) ``WHERE parent_session_id IS NULL`` and
``idx_sessions_roots_source_listing`` (source, started_at DESC, id,
parent_session_id) for one source: partial indexes holding only the
sessions a default listing shows, in the order the listing reads them
(ties on ``started_at`` by source and id, as the full index ordered the
roots), so an OFFSET skips entries without testing any. The trailing
``parent_session_id`` makes them covering for SQLite (it does not count a
partial index's WHERE column as covered otherwise).

PostgreSQL gets the two indexes (its planner picks them itself) but not
the totals: its writers run concurrently, and one row that every append
updates would queue all of them behind each other's commits.

A file of the agent's own schema versions never runs this revision; its
reports keep the exact aggregates (see :mod:`hermes_store.backends.layout`).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import context, op

from hermes_store.schema.bigram_index import driver_connection
from hermes_store.schema.migration_ops import is_sqlite
from hermes_store.schema.totals import TABLES, TRIGGERS, fill_totals

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ROOT_INDEXES = {
    "idx_sessions_roots_listing": (
        "sessions (started_at DESC, source, id, parent_session_id) WHERE parent_session_id IS NULL"
    ),
    "idx_sessions_roots_source_listing": (
        "sessions (source, started_at DESC, id, parent_session_id) WHERE parent_session_id IS NULL"
    ),
}

OFFLINE_BACKFILL = (
    "INSERT INTO message_total (id, messages) SELECT 1, COUNT(*) FROM messages",
    "INSERT INTO model_usage_totals (model, sessions, input_sum, input_known, output_sum, "
    "output_known, cost_sum, cost_error, cost_known) "
    "SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0), COUNT(input_tokens), "
    "COALESCE(SUM(output_tokens), 0), COUNT(output_tokens), "
    "COALESCE(SUM(estimated_cost_usd), 0.0), 0.0, COUNT(estimated_cost_usd) "
    "FROM sessions WHERE model IS NOT NULL GROUP BY model",
)
"""For ``--sql`` output: the back-fill as plain statements."""


def upgrade() -> None:
    for name, target in ROOT_INDEXES.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")
    if not is_sqlite():
        return
    for name, ddl in TABLES.items():
        op.execute(f"DROP TABLE IF EXISTS {name}")
        op.execute(ddl)
    for name, ddl in TRIGGERS.items():  # as written: readers compare the stored SQL
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute(ddl)
    if context.is_offline_mode():
        for statement in OFFLINE_BACKFILL:
            op.execute(statement)
        return
    fill_totals(driver_connection(op.get_bind()))


def downgrade() -> None:
    for name in ROOT_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    if not is_sqlite():
        return
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    for name in TABLES:
        op.execute(f"DROP TABLE IF EXISTS {name}")
