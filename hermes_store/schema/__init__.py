"""The schema's lifecycle: the tables, versions, migrations and a file's layout.

``tables`` holds the documented tables as Core ``Table`` objects (what the
store's own SQL is built on); ``models`` maps the ORM entities onto them, for
``uow.orm`` only; ``state`` reads which version a file is at (one read);
``migrate``/``migration_ops`` bring our files to head with Alembic;
``layout`` reads what a file of any version actually holds.
"""
