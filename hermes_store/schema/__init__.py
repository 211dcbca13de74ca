"""The schema's lifecycle: the mapped tables, versions, migrations and a file's layout.

``models`` maps the documented tables; ``state`` reads which version a file
is at (one read); ``migrate``/``migration_ops`` bring our files to head with
Alembic; ``layout`` reads what a file of any version actually holds.
"""
