"""Kept totals on PostgreSQL (revision 0017): the message count and the usage per model.

The same two answers SQLite keeps (:mod:`hermes_store.schema.totals`, whose
table names this module reuses), kept differently because PostgreSQL's
writers run at once: one row that every append updates would queue every
writer behind the one before it, until its commit. So each total is spread
over :data:`STRIPES` rows, and a writer adds to the row of
``pg_backend_pid() % STRIPES``; writers on other connections mostly touch
other rows, and a reader sums the stripes.

The triggers are statement-level with transition tables: an append's
``INSERT`` adds one to one row, a ``COPY`` of 20,000 rows or a prune
deleting thousands adds their count in one step, instead of one row update
per row. A transition table cannot go with a column list, so the usage
trigger on ``UPDATE`` sees every update of ``sessions`` (the append's
counter update among them); it writes only when a usage column moved.

Costs are summed as ``numeric``: the stored costs are ``double precision``,
whose exact sum ``numeric`` holds, so adding and taking away leaves no
rounding residue; the report reads it back as a float.

A kept total is read only while it can be trusted: its table is there and
its triggers exist and are enabled (``pg_trigger.tgenabled`` is ``O`` or
``A``); a trigger dropped or disabled (``ALTER TABLE ... DISABLE TRIGGER``,
a replica's session role) sends the reader back to the exact aggregate, so
a damaged deployment still gives right numbers. ``hermes-store check``
compares the totals with the tables and ``check --repair`` sets them again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.schema.totals import MESSAGE_TOTAL_TABLE, MODEL_TOTALS_TABLE, usage_equal

STRIPES = 16
"""Rows each total is spread over (keyed by ``pg_backend_pid() % STRIPES``)."""

_STRIPE = f"mod(pg_backend_pid(), {STRIPES})"

TABLES = {
    MESSAGE_TOTAL_TABLE: (
        f"CREATE TABLE {MESSAGE_TOTAL_TABLE} (\n"
        "    stripe INTEGER PRIMARY KEY,\n"
        "    messages BIGINT NOT NULL\n"
        ")"
    ),
    MODEL_TOTALS_TABLE: (
        f"CREATE TABLE {MODEL_TOTALS_TABLE} (\n"
        "    model TEXT NOT NULL,\n"
        "    stripe INTEGER NOT NULL,\n"
        "    sessions BIGINT NOT NULL,\n"
        "    input_sum BIGINT NOT NULL, input_known BIGINT NOT NULL,\n"
        "    output_sum BIGINT NOT NULL, output_known BIGINT NOT NULL,\n"
        "    cost_sum NUMERIC NOT NULL, cost_known BIGINT NOT NULL,\n"
        "    PRIMARY KEY (model, stripe)\n"
        ")"
    ),
}
"""The tables as created (``*_known``: how many values were not NULL)."""

_ADD_MESSAGES = (
    f"INSERT INTO {MESSAGE_TOTAL_TABLE} AS t (stripe, messages) "
    f"SELECT {_STRIPE}, {{sign}}COUNT(*) FROM {{rows}} "
    "ON CONFLICT (stripe) DO UPDATE SET messages = t.messages + excluded.messages"
)


def _usage_terms(rows: str, sign: str) -> str:
    """One signed row of deltas per row of transition table ``rows`` that has a model."""
    return (
        f"SELECT model, {sign}1 AS sessions, "
        f"{sign}COALESCE(input_tokens, 0)::bigint AS input_sum, "
        f"{sign}(input_tokens IS NOT NULL)::int AS input_known, "
        f"{sign}COALESCE(output_tokens, 0)::bigint AS output_sum, "
        f"{sign}(output_tokens IS NOT NULL)::int AS output_known, "
        f"{sign}COALESCE(estimated_cost_usd, 0)::numeric AS cost_sum, "
        f"{sign}(estimated_cost_usd IS NOT NULL)::int AS cost_known "
        f"FROM {rows} WHERE model IS NOT NULL"
    )


_USAGE_COLUMNS = (
    "sessions",
    "input_sum",
    "input_known",
    "output_sum",
    "output_known",
    "cost_sum",
    "cost_known",
)


def _add_usage(terms: str) -> str:
    """Add the summed ``terms`` per model to this stripe's rows; all-zero deltas write nothing."""
    sums = ", ".join(f"SUM({c}) AS {c}" for c in _USAGE_COLUMNS)
    moved = " OR ".join(f"SUM({c}) <> 0" for c in _USAGE_COLUMNS)
    columns = ", ".join(_USAGE_COLUMNS)
    updates = ", ".join(f"{c} = t.{c} + excluded.{c}" for c in _USAGE_COLUMNS)
    return (
        f"INSERT INTO {MODEL_TOTALS_TABLE} AS t (model, stripe, {columns}) "
        f"SELECT model, {_STRIPE}, {columns} FROM "
        f"(SELECT model, {sums} FROM ({terms}) d GROUP BY model HAVING {moved}) g "
        f"ON CONFLICT (model, stripe) DO UPDATE SET {updates}"
    )


def _function(name: str, body: str) -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n    {body};\n    RETURN NULL;\nEND\n$$"
    )


FUNCTIONS = {
    "message_total_insert": _function(
        "message_total_insert", _ADD_MESSAGES.format(sign="", rows="new_rows")
    ),
    "message_total_delete": _function(
        "message_total_delete", _ADD_MESSAGES.format(sign="-", rows="old_rows")
    ),
    "model_usage_totals_insert": _function(
        "model_usage_totals_insert", _add_usage(_usage_terms("new_rows", ""))
    ),
    "model_usage_totals_delete": _function(
        "model_usage_totals_delete", _add_usage(_usage_terms("old_rows", "-"))
    ),
    "model_usage_totals_update": _function(
        "model_usage_totals_update",
        _add_usage(_usage_terms("new_rows", "") + " UNION ALL " + _usage_terms("old_rows", "-")),
    ),
    "message_total_truncate": _function(
        "message_total_truncate", f"DELETE FROM {MESSAGE_TOTAL_TABLE}"
    ),
    "model_usage_totals_truncate": _function(
        "model_usage_totals_truncate", f"DELETE FROM {MODEL_TOTALS_TABLE}"
    ),
}
"""Each trigger's function (named as its trigger)."""

TRIGGERS = {
    "message_total_insert": (
        "CREATE TRIGGER message_total_insert AFTER INSERT ON messages "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION message_total_insert()"
    ),
    "message_total_delete": (
        "CREATE TRIGGER message_total_delete AFTER DELETE ON messages "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION message_total_delete()"
    ),
    "model_usage_totals_insert": (
        "CREATE TRIGGER model_usage_totals_insert AFTER INSERT ON sessions "
        "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION model_usage_totals_insert()"
    ),
    "model_usage_totals_delete": (
        "CREATE TRIGGER model_usage_totals_delete AFTER DELETE ON sessions "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION model_usage_totals_delete()"
    ),
    "model_usage_totals_update": (
        "CREATE TRIGGER model_usage_totals_update AFTER UPDATE ON sessions "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION model_usage_totals_update()"
    ),
    # TRUNCATE fires no delete trigger: an emptied table empties its totals.
    "message_total_truncate": (
        "CREATE TRIGGER message_total_truncate AFTER TRUNCATE ON messages "
        "FOR EACH STATEMENT EXECUTE FUNCTION message_total_truncate()"
    ),
    "model_usage_totals_truncate": (
        "CREATE TRIGGER model_usage_totals_truncate AFTER TRUNCATE ON sessions "
        "FOR EACH STATEMENT EXECUTE FUNCTION model_usage_totals_truncate()"
    ),
}

MESSAGE_TRIGGERS = tuple(name for name in TRIGGERS if name.startswith("message_total"))
MODEL_TRIGGERS = tuple(name for name in TRIGGERS if name.startswith("model_usage_totals"))


def _trusted(table: str, triggers: tuple[str, ...]) -> str:
    """1 when ``table`` is there and every one of ``triggers`` exists and fires."""
    names = ", ".join(f"'{name}'" for name in triggers)
    return (
        f"SELECT to_regclass('{table}') IS NOT NULL AND "
        f"(SELECT COUNT(*) FROM pg_trigger WHERE NOT tgisinternal AND tgname IN ({names}) "
        "AND tgenabled IN ('O', 'A') "
        "AND tgrelid IN (to_regclass('messages'), to_regclass('sessions'))) "
        f"= {len(triggers)}"
    )


KEPT_MESSAGE_TRUSTED = text(_trusted(MESSAGE_TOTAL_TABLE, MESSAGE_TRIGGERS))
KEPT_MESSAGE_COUNT = text(f"SELECT SUM(messages) FROM {MESSAGE_TOTAL_TABLE}")
"""The kept count (NULL when the table has no row: count instead)."""
KEPT_USAGE_TRUSTED = text(_trusted(MODEL_TOTALS_TABLE, MODEL_TRIGGERS))
KEPT_USAGE = text(
    f"""
    SELECT model,
           SUM(sessions)::bigint AS session_count,
           CASE WHEN SUM(input_known) > 0 THEN SUM(input_sum)::bigint END AS total_input,
           CASE WHEN SUM(output_known) > 0 THEN SUM(output_sum)::bigint END AS total_output,
           CASE WHEN SUM(cost_known) > 0 THEN SUM(cost_sum)::double precision END AS total_cost
    FROM {MODEL_TOTALS_TABLE}
    GROUP BY model
    HAVING SUM(sessions) > 0
    ORDER BY total_cost DESC NULLS LAST, model
    """
)
"""The usage report from the kept stripes (the same rows as the aggregate over ``sessions``).

SUM of BIGINT is NUMERIC on PostgreSQL: without the casts the counts reached
callers as Decimal (and JSON as strings), where SQLite and the aggregate give ints.
"""

_EXACT_USAGE = text(
    """
    SELECT model, COUNT(*), SUM(input_tokens), COUNT(input_tokens), SUM(output_tokens),
           COUNT(output_tokens), SUM(estimated_cost_usd::numeric), COUNT(estimated_cost_usd)
    FROM sessions WHERE model IS NOT NULL GROUP BY model
    """
)
_KEPT_USAGE_ROWS = text(
    f"SELECT model, SUM(sessions), SUM(input_sum), SUM(input_known), SUM(output_sum), "
    f"SUM(output_known), SUM(cost_sum), SUM(cost_known) FROM {MODEL_TOTALS_TABLE} "
    "GROUP BY model HAVING SUM(sessions) <> 0"
)


def kept_message_count(connection: Connection) -> int | None:
    """The kept message count, or None when it cannot be trusted (count instead)."""
    if not connection.execute(KEPT_MESSAGE_TRUSTED).scalar():
        return None
    kept = connection.execute(KEPT_MESSAGE_COUNT).scalar()
    return None if kept is None else int(kept)


def kept_usage(connection: Connection) -> list[dict[str, Any]] | None:
    """The usage report from the kept totals, or None when they cannot be trusted."""
    if not connection.execute(KEPT_USAGE_TRUSTED).scalar():
        return None
    return [dict(row) for row in connection.execute(KEPT_USAGE).mappings()]


def _uninstall_statements() -> list[str]:
    drops = []
    for name, ddl in TRIGGERS.items():
        table = "messages" if " ON messages " in ddl else "sessions"
        drops.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
    drops += [f"DROP FUNCTION IF EXISTS {name}()" for name in FUNCTIONS]
    return drops + [f"DROP TABLE IF EXISTS {name}" for name in TABLES]


UNINSTALL = tuple(_uninstall_statements())
"""Revision 0017's downgrade: the triggers, their functions, the tables."""

FILL = (
    f"LOCK TABLE messages, sessions, {MESSAGE_TOTAL_TABLE}, {MODEL_TOTALS_TABLE} "
    "IN SHARE ROW EXCLUSIVE MODE",
    f"DELETE FROM {MESSAGE_TOTAL_TABLE}",
    f"INSERT INTO {MESSAGE_TOTAL_TABLE} (stripe, messages) SELECT 0, COUNT(*) FROM messages",
    f"DELETE FROM {MODEL_TOTALS_TABLE}",
    f"INSERT INTO {MODEL_TOTALS_TABLE} (model, stripe, {', '.join(_USAGE_COLUMNS)}) "
    "SELECT model, 0, COUNT(*), COALESCE(SUM(input_tokens), 0), COUNT(input_tokens), "
    "COALESCE(SUM(output_tokens), 0), COUNT(output_tokens), "
    "COALESCE(SUM(estimated_cost_usd::numeric), 0), COUNT(estimated_cost_usd) "
    "FROM sessions WHERE model IS NOT NULL GROUP BY model",
)
"""Both totals set from the tables as they are (back-fill and repair).

Both tables are locked first (``SHARE ROW EXCLUSIVE``: readers go on,
writers wait), so no write can fall between the count and the triggers'
next step.
"""

INSTALL = (
    *UNINSTALL,
    *TABLES.values(),
    *FUNCTIONS.values(),
    *TRIGGERS.values(),
    *FILL,
)
"""Revision 0017's upgrade, as plain statements (also for ``alembic upgrade --sql``)."""


def install(connection: Connection) -> None:
    """Create the tables, functions and triggers afresh, and fill the totals."""
    for statement in INSTALL:
        connection.exec_driver_sql(statement)


def fill_totals(connection: Connection) -> None:
    """Set both totals from the tables as they are (see :data:`FILL`)."""
    for statement in FILL:
        connection.exec_driver_sql(statement)


def totals_problems(connection: Connection) -> list[str]:
    """What the kept totals get wrong against the tables, one line each ([] when right)."""
    if connection.execute(text(f"SELECT to_regclass('{MESSAGE_TOTAL_TABLE}')")).scalar() is None:
        return []  # before revision 0017: nothing is kept
    problems: list[str] = []
    kept_count = connection.execute(KEPT_MESSAGE_COUNT).scalar()
    exact_count = connection.execute(text("SELECT COUNT(*) FROM messages")).scalar_one()
    if kept_count is None:
        problems.append(f"{MESSAGE_TOTAL_TABLE} has no row (messages: {exact_count})")
    elif kept_count != exact_count:
        problems.append(
            f"{MESSAGE_TOTAL_TABLE} says {kept_count} messages, there are {exact_count}"
        )
    kept = {row[0]: tuple(row[1:]) for row in connection.execute(_KEPT_USAGE_ROWS)}
    exact = {row[0]: tuple(row[1:]) for row in connection.execute(_EXACT_USAGE)}
    for model in sorted(set(kept) | set(exact)):
        have, want = kept.get(model), exact.get(model)
        if have is None or want is None:
            problems.append(
                f"{MODEL_TOTALS_TABLE}: model {model!r} "
                + ("missing" if have is None else "kept but has no sessions")
            )
        elif not usage_equal(have, want):
            problems.append(
                f"{MODEL_TOTALS_TABLE}: model {model!r} kept {have}, sessions say {want}"
            )
    problems += [f"trigger {name} is missing or disabled" for name in _idle_triggers(connection)]
    return problems


def _idle_triggers(connection: Connection) -> list[str]:
    """The kept totals' triggers that are missing or do not fire."""
    firing = set(
        connection.execute(
            text(
                "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal "
                "AND tgenabled IN ('O', 'A') "
                "AND tgrelid IN (to_regclass('messages'), to_regclass('sessions'))"
            )
        ).scalars()
    )
    return [name for name in TRIGGERS if name not in firing]


def repair(connection: Connection) -> None:
    """Put back missing or disabled triggers and set the totals again."""
    if _idle_triggers(connection) or (
        connection.execute(text(f"SELECT to_regclass('{MODEL_TOTALS_TABLE}')")).scalar() is None
    ):
        install(connection)
        return
    fill_totals(connection)
