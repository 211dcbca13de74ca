"""Our addition (schema_version stays 6): PostgreSQL keeps the message count and usage per model.

Issue #28 found ``message_count()`` and ``token_usage_by_model()`` on
PostgreSQL aggregating the whole table on every call, growing with the data,
where SQLite reads revision 0011's kept totals. This revision keeps them on
PostgreSQL too, in the same two tables (``message_total``,
``model_usage_totals``), spread over stripes keyed by the writer's backend
process so that concurrent writers do not queue on one row, and kept by
statement-level triggers with transition tables (see
:mod:`hermes_store.backends.postgresql.totals`: the stripes, the numeric
costs, when a reader trusts them). They are filled here from the rows
already stored, under a lock that lets readers go on and makes writers wait
for the fill.

On SQLite this revision does nothing: revision 0011 keeps its totals.

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

from hermes_store.backends.postgresql.totals import INSTALL, UNINSTALL
from hermes_store.schema.migration_ops import is_sqlite

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if is_sqlite():
        return
    for statement in INSTALL:
        op.execute(statement)


def downgrade() -> None:
    if is_sqlite():
        return
    for statement in UNINSTALL:
        op.execute(statement)
