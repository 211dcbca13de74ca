"""Totals kept in the file (revision 0011): the message count and the usage per model.

``message_count()`` and ``token_usage_by_model()`` are whole-table
aggregates: at a million messages and 50,000 sessions each read tens of
thousands of index entries on every call (tens to hundreds of ms). Their
answers are kept instead, in two small tables, by triggers written in
plain SQL: they live in the file, so they run for every program that
writes it -- the old ``sqlite3`` code, the agent's own code, a user's
``sqlite3`` shell -- not only for this package.

A kept total is read only where it can be trusted: the table's row is
there and every trigger that keeps it is in the file with exactly the SQL
written here (:func:`intact_guard`, checked in the same statement and
snapshot as the read). The agent's code, when it opens one of our files,
moves it to its own schema versions and may rebuild tables, which drops
their triggers; a user may drop one. Then the reader falls back to the
exact aggregate. What the triggers cannot see: an ``INSERT OR REPLACE``
that replaces a message deletes the old row without firing delete
triggers (SQLite fires them only with ``recursive_triggers`` on), which
leaves the FTS indexes stale in the same way; ``hermes-store check``
reports a total that disagrees and ``check --repair`` refills it.

Triggers never make a write fail: no constraint but the primary keys,
``COALESCE`` around every value a program may leave NULL.

The costs are floats. A float total kept by adding and subtracting drifts
in its last bits, and SQLite's ``SUM`` (3.40: a plain running sum) gives
a different last bit for another order of the same values; so the kept
cost is a compensated (Neumaier) sum, ``cost_sum + cost_error``, within
an ulp or so of the exact sum of the stored costs, and a check compares
costs with a relative tolerance (:data:`COST_TOLERANCE`), everything
else exactly.
"""

from __future__ import annotations

import math
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

MESSAGE_TOTAL_TABLE = "message_total"
MODEL_TOTALS_TABLE = "model_usage_totals"

TABLES = {
    MESSAGE_TOTAL_TABLE: (
        f"CREATE TABLE {MESSAGE_TOTAL_TABLE} (\n"
        "    id INTEGER PRIMARY KEY CHECK (id = 1),\n"
        "    messages INTEGER\n"
        ")"
    ),
    MODEL_TOTALS_TABLE: (
        f"CREATE TABLE {MODEL_TOTALS_TABLE} (\n"
        "    model TEXT PRIMARY KEY,\n"
        "    sessions INTEGER,\n"
        "    input_sum INTEGER, input_known INTEGER,\n"
        "    output_sum INTEGER, output_known INTEGER,\n"
        "    cost_sum REAL, cost_error REAL, cost_known INTEGER\n"
        ") WITHOUT ROWID"
    ),
}
"""The tables as created (``*_known``: how many values were not NULL -- ``SUM`` of none is NULL)."""


def _add(sign: str, row: str) -> str:
    """SET clauses that add (``+``) or take away (``-``) one session ``row``'s usage.

    The cost is one Neumaier step: the running sum, and in ``cost_error``
    what its rounding lost. SET expressions see the values before the
    update, so both use the old ``cost_sum``.
    """
    x = f"({sign}COALESCE({row}.estimated_cost_usd, 0.0))"
    step = (
        f"CASE WHEN abs(cost_sum) >= abs({x}) "
        f"THEN (cost_sum - (cost_sum + {x})) + {x} "
        f"ELSE ({x} - (cost_sum + {x})) + cost_sum END"
    )
    return (
        f"sessions = sessions {sign} 1, "
        f"input_sum = input_sum {sign} COALESCE({row}.input_tokens, 0), "
        f"input_known = input_known {sign} ({row}.input_tokens IS NOT NULL), "
        f"output_sum = output_sum {sign} COALESCE({row}.output_tokens, 0), "
        f"output_known = output_known {sign} ({row}.output_tokens IS NOT NULL), "
        f"cost_error = cost_error + {step}, "
        f"cost_sum = cost_sum + {x}, "
        f"cost_known = cost_known {sign} ({row}.estimated_cost_usd IS NOT NULL)"
    )


def _change(old: str, new: str) -> str:
    """SET clauses for a session whose usage changed under the same model: one step each."""
    d = f"(COALESCE({new}.estimated_cost_usd, 0.0) - COALESCE({old}.estimated_cost_usd, 0.0))"
    step = (
        f"CASE WHEN abs(cost_sum) >= abs({d}) "
        f"THEN (cost_sum - (cost_sum + {d})) + {d} "
        f"ELSE ({d} - (cost_sum + {d})) + cost_sum END"
    )

    def delta(name: str) -> str:
        return f"COALESCE({new}.{name}, 0) - COALESCE({old}.{name}, 0)"

    def known(name: str) -> str:
        return f"({new}.{name} IS NOT NULL) - ({old}.{name} IS NOT NULL)"

    return (
        f"input_sum = input_sum + {delta('input_tokens')}, "
        f"input_known = input_known + {known('input_tokens')}, "
        f"output_sum = output_sum + {delta('output_tokens')}, "
        f"output_known = output_known + {known('output_tokens')}, "
        f"cost_error = cost_error + {step}, "
        f"cost_sum = cost_sum + {d}, "
        f"cost_known = cost_known + {known('estimated_cost_usd')}"
    )


def _ensure_model(row: str) -> str:
    """An empty totals row for ``row``'s model when there is none (a model never NULL here)."""
    return (
        f"INSERT INTO {MODEL_TOTALS_TABLE} (model, sessions, input_sum, input_known, "
        "output_sum, output_known, cost_sum, cost_error, cost_known) "
        f"SELECT {row}.model, 0, 0, 0, 0, 0, 0.0, 0.0, 0 WHERE {row}.model IS NOT NULL "
        "ON CONFLICT (model) DO NOTHING;"
    )


_USAGE_COLUMNS = "model, input_tokens, output_tokens, estimated_cost_usd"

TRIGGERS = {
    "message_total_insert": (
        "CREATE TRIGGER message_total_insert AFTER INSERT ON messages BEGIN\n"
        f"    UPDATE {MESSAGE_TOTAL_TABLE} SET messages = messages + 1 WHERE id = 1;\n"
        "END"
    ),
    "message_total_delete": (
        "CREATE TRIGGER message_total_delete AFTER DELETE ON messages BEGIN\n"
        f"    UPDATE {MESSAGE_TOTAL_TABLE} SET messages = messages - 1 WHERE id = 1;\n"
        "END"
    ),
    "model_usage_totals_insert": (
        "CREATE TRIGGER model_usage_totals_insert AFTER INSERT ON sessions\n"
        "WHEN new.model IS NOT NULL BEGIN\n"
        f"    {_ensure_model('new')}\n"
        f"    UPDATE {MODEL_TOTALS_TABLE} SET {_add('+', 'new')} WHERE model = new.model;\n"
        "END"
    ),
    "model_usage_totals_delete": (
        "CREATE TRIGGER model_usage_totals_delete AFTER DELETE ON sessions\n"
        "WHEN old.model IS NOT NULL BEGIN\n"
        f"    UPDATE {MODEL_TOTALS_TABLE} SET {_add('-', 'old')} WHERE model = old.model;\n"
        f"    DELETE FROM {MODEL_TOTALS_TABLE} WHERE model = old.model AND sessions = 0;\n"
        "END"
    ),
    # The usual change (a usage report of a session whose model stays): one UPDATE.
    "model_usage_totals_update": (
        f"CREATE TRIGGER model_usage_totals_update AFTER UPDATE OF {_USAGE_COLUMNS} ON sessions\n"
        "WHEN new.model IS NOT NULL AND new.model IS old.model BEGIN\n"
        f"    UPDATE {MODEL_TOTALS_TABLE} SET {_change('old', 'new')} WHERE model = new.model;\n"
        "END"
    ),
    # A session that moves between models (or gets its first one): out of one, into the other.
    "model_usage_totals_move": (
        f"CREATE TRIGGER model_usage_totals_move AFTER UPDATE OF {_USAGE_COLUMNS} ON sessions\n"
        "WHEN new.model IS NOT old.model BEGIN\n"
        f"    UPDATE {MODEL_TOTALS_TABLE} SET {_add('-', 'old')} WHERE model = old.model;\n"
        f"    DELETE FROM {MODEL_TOTALS_TABLE} WHERE model = old.model AND sessions = 0;\n"
        f"    {_ensure_model('new')}\n"
        f"    UPDATE {MODEL_TOTALS_TABLE} SET {_add('+', 'new')} WHERE model = new.model;\n"
        "END"
    ),
}
"""Each trigger's SQL exactly as SQLite keeps it in ``sqlite_master`` (compared by readers)."""

MESSAGE_TRIGGERS = ("message_total_insert", "message_total_delete")
MODEL_TRIGGERS = tuple(name for name in TRIGGERS if name.startswith("model_usage_totals"))

OBJECTS = frozenset({("table", name) for name in TABLES} | {("trigger", name) for name in TRIGGERS})
"""Everything the kept totals need: without all of it, they may be stale and are not read."""

COST_TOLERANCE = 1e-9
"""Relative difference a kept cost may have from ``SUM`` before a check calls it wrong."""


def intact_guard(triggers: tuple[str, ...]) -> str:
    """A SQL condition: every one of ``triggers`` is in the file exactly as written here.

    Read in the same statement as the total, so the answer and the triggers
    that kept it are of one snapshot. The schema table holds a few dozen
    rows: a scan of it costs microseconds.
    """
    tests = " OR ".join(
        f"(name = '{name}' AND sql = '{TRIGGERS[name].replace(chr(39), chr(39) * 2)}')"
        for name in triggers
    )
    return (
        f"(SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND ({tests})) "
        f"= {len(triggers)}"
    )


def _trusted(table: str, triggers: tuple[str, ...]) -> str:
    """A query of 1 when ``table`` is there and :func:`intact_guard` holds for ``triggers``.

    Asked first, in the same transaction as the read that follows: a statement
    naming a table the file lacks would not even compile.
    """
    return (
        f"SELECT (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}')"
        f" = 1 AND {intact_guard(triggers)}"
    )


KEPT_MESSAGE_TRUSTED = _trusted(MESSAGE_TOTAL_TABLE, MESSAGE_TRIGGERS)
"""1 when the kept message count can be read."""
KEPT_MESSAGE_COUNT = f"SELECT messages FROM {MESSAGE_TOTAL_TABLE} WHERE id = 1"
"""The kept message count (run after :data:`KEPT_MESSAGE_TRUSTED`; no row: count instead)."""
KEPT_USAGE_TRUSTED = _trusted(MODEL_TOTALS_TABLE, MODEL_TRIGGERS)
"""1 when the kept usage per model can be read (an empty table is then a true answer)."""
KEPT_TOTALS_INTACT = (
    f"SELECT (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
    f"('{MESSAGE_TOTAL_TABLE}', '{MODEL_TOTALS_TABLE}')) = 2 AND {intact_guard(tuple(TRIGGERS))}"
)
"""1 when the file keeps both totals (tables and every trigger as written): a check's cue."""
"""1 when the kept usage per model can be read (an empty table is then a true answer)."""
KEPT_USAGE = f"""
    SELECT model,
           sessions AS session_count,
           CASE WHEN input_known > 0 THEN input_sum END AS total_input,
           CASE WHEN output_known > 0 THEN output_sum END AS total_output,
           CASE WHEN cost_known > 0 THEN cost_sum + cost_error END AS total_cost
    FROM {MODEL_TOTALS_TABLE}
    WHERE sessions > 0
    ORDER BY total_cost DESC NULLS LAST, model
"""
"""The document's usage report from the kept totals (run after :data:`KEPT_USAGE_TRUSTED`)."""

EXACT_USAGE = """
    SELECT model, COUNT(*), SUM(input_tokens), COUNT(input_tokens), SUM(output_tokens),
           COUNT(output_tokens), SUM(estimated_cost_usd), COUNT(estimated_cost_usd)
    FROM sessions WHERE model IS NOT NULL GROUP BY model
"""
"""What the model totals should hold, aggregated from ``sessions`` (fill and check)."""


def fill_totals(dbapi_connection: sqlite3.Connection) -> None:
    """Set both totals from the tables as they are (back-fill, recovery, repair).

    Runs inside the caller's write transaction, so no write can fall between
    the count and the triggers' next step.
    """
    dbapi_connection.execute(f"DELETE FROM {MESSAGE_TOTAL_TABLE}")
    dbapi_connection.execute(
        f"INSERT INTO {MESSAGE_TOTAL_TABLE} (id, messages) SELECT 1, COUNT(*) FROM messages"
    )
    dbapi_connection.execute(f"DELETE FROM {MODEL_TOTALS_TABLE}")
    rows = dbapi_connection.execute(EXACT_USAGE).fetchall()
    dbapi_connection.executemany(
        f"INSERT INTO {MODEL_TOTALS_TABLE} (model, sessions, input_sum, input_known, output_sum, "
        "output_known, cost_sum, cost_error, cost_known) VALUES (?, ?, ?, ?, ?, ?, ?, 0.0, ?)",
        [
            (model, n, i or 0, i_n, o or 0, o_n, c or 0.0, c_n)
            for model, n, i, i_n, o, o_n, c, c_n in rows
        ],
    )


def totals_problems(dbapi_connection: sqlite3.Connection) -> list[str]:
    """What the kept totals get wrong against the tables, one line each ([] when right).

    Costs within :data:`COST_TOLERANCE` (relative) of ``SUM`` are right;
    every count and token sum must be equal.
    """
    problems: list[str] = []
    kept_count = dbapi_connection.execute(
        f"SELECT messages FROM {MESSAGE_TOTAL_TABLE} WHERE id = 1"
    ).fetchone()
    (exact_count,) = dbapi_connection.execute("SELECT COUNT(*) FROM messages").fetchone()
    if kept_count is None:
        problems.append(f"{MESSAGE_TOTAL_TABLE} has no row (messages: {exact_count})")
    elif kept_count[0] != exact_count:
        problems.append(
            f"{MESSAGE_TOTAL_TABLE} says {kept_count[0]} messages, there are {exact_count}"
        )
    kept: dict[Any, tuple[Any, ...]] = {
        row[0]: tuple(row[1:])
        for row in dbapi_connection.execute(
            f"SELECT model, sessions, input_sum, input_known, output_sum, output_known, "
            f"cost_sum + cost_error, cost_known FROM {MODEL_TOTALS_TABLE} WHERE sessions <> 0"
        )
    }
    exact = {row[0]: tuple(row[1:]) for row in dbapi_connection.execute(EXACT_USAGE)}
    for model in sorted(set(kept) | set(exact), key=repr):
        have, want = kept.get(model), exact.get(model)
        if have is None or want is None:
            problems.append(
                f"{MODEL_TOTALS_TABLE}: model {model!r} "
                + ("missing" if have is None else "kept but has no sessions")
            )
            continue
        if not usage_equal(have, want):
            problems.append(
                f"{MODEL_TOTALS_TABLE}: model {model!r} kept {have}, sessions say {want}"
            )
    return problems


def usage_equal(kept: tuple[Any, ...], exact: tuple[Any, ...]) -> bool:
    """A kept usage row against the one ``SUM`` gives: counts exact, costs within tolerance.

    Each row is (sessions, input, input rows, output, output rows, cost, cost rows); a
    cost may come as a float (SQLite) or a Decimal (PostgreSQL's numeric).
    """
    sessions, i, i_n, o, o_n, cost, c_n = kept
    e_sessions, e_i, e_i_n, e_o, e_o_n, e_cost, e_c_n = exact
    if (sessions, i_n, o_n, c_n) != (e_sessions, e_i_n, e_o_n, e_c_n):
        return False
    if (i if i_n else None) != e_i or (o if o_n else None) != e_o:
        return False
    if not c_n:
        return e_cost is None
    return math.isclose(float(cost), float(e_cost), rel_tol=COST_TOLERANCE, abs_tol=1e-12)
