"""Execution options both backends' begin rules read: how a transaction may start.

A unit of work sets them on its connection; each backend's ``begin`` rule
(SQLite's in :mod:`hermes_store.backends.sqlite.engine`, PostgreSQL's in
:mod:`hermes_store.backends.postgresql.engine`) reads them, so the two share
the names and nothing else.
"""

from __future__ import annotations

READ_OPTION = "hermes_read"
"""Execution option: the transaction only reads, so it must not take the write lock."""
PATIENCE_OPTION = "hermes_patience"
"""Execution option: seconds this transaction may wait for the write lock."""
BEGIN_OPTION = "hermes_begin"
"""Engine execution option: ``rule(connection, write, patience_s)``, run right after a unit
begins, for settings a backend gives each transaction (``None``: the engine's own)."""
