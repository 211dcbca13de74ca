"""``VACUUM (ANALYZE)`` of the store's tables on PostgreSQL: outside any transaction.

PostgreSQL refuses ``VACUUM`` inside a transaction block, and every
connection the store's engine hands out begins one; so the statement runs
on a connection switched to autocommit for it. Autovacuum normally does
this work; an explicit run after a large prune gives the dead rows' space
back to the tables and refreshes the planner's statistics at once.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

TABLES = ("sessions", "messages", "state_meta")


def vacuum(engine: Engine) -> None:
    """Vacuum and analyze the store's tables (each one, one statement)."""
    with engine.connect() as connection:  # a failure is the store's to name
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        autocommit.exec_driver_sql(f"VACUUM (ANALYZE) {', '.join(TABLES)}")
