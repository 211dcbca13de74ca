"""Our addition (schema_version stays 6): take back the 7 that revision 0007 once wrote.

Releases of hermes_store before this revision stamped ``schema_version = 7``
with the trigram index. The Hermes agent's own store gives 7 another meaning
("``messages.reasoning_content`` added"): its code, finding 7, skips that
step, and its next append fails for want of the column. Our revisions now
keep ``schema_version`` at the design document's 6 and are known by
``alembic_version`` alone; this step moves a file that still carries our 7
back to 6, so that the agent's code, opening it next, runs its own steps
from 7 on. A file at 7 that the agent's code wrote is never seen here: such
a file follows the agent's ladder and no revision runs on it.

Nothing else changes, so the downgrade has nothing to undo.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import set_schema_version

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    set_schema_version(6)


def downgrade() -> None:
    """0007 now leaves schema_version at 6 as well: nothing to take back."""
