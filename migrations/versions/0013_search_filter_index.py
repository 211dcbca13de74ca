"""Our addition (schema_version stays 6): an index of each message's role and session.

Issue #19 found a common phrase whose ``source_filter``/``role_filter`` pass
a few of its matches spending most of its time reading the ``messages`` row
of every match for ``role`` and ``session_id`` (to reach ``sessions.source``;
the numbers are in docs/design/search.md). Those rows carry whole
conversations, spread over the whole file, and no index held the two
columns. ``idx_messages_search_filter`` (id, role, session_id) does: keyed
by the rowid, it answers "what role, which session" for any match from a
small b-tree (a few dozen bytes an entry), so a filtered search tests each
match there and reads the rows of the page alone (see
:class:`hermes_store.repositories.search.SearchRepository`). It is built
from ``messages`` in rowid order, which is the index's own order: one
pass, no sort.

An index is invisible to other programs: the old ``sqlite3`` code and the
agent's own migrations neither read nor mind it, and a file of the agent's
own schema versions never runs our revisions, so it never gets this one
(its filtered searches read the rows, at the old speed).

On PostgreSQL this revision does nothing: its word search ranks with
``ts_rank``, which reads each match's heap row for the text anyway, so the
two columns come with it.

``schema_version`` is left at 6 (see revision 0008).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from alembic import op

from hermes_store.schema.migration_ops import is_sqlite

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

INDEX = "idx_messages_search_filter"
TARGET = "messages (id, role, session_id)"


def upgrade() -> None:
    if is_sqlite():
        op.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON {TARGET}")


def downgrade() -> None:
    if is_sqlite():
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
