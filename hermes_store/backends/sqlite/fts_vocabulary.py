"""The terms an FTS5 index holds under a prefix, read from its own vocabulary.

An ``fts5vocab`` table of type ``instance`` over the index lists (term,
message, column, offset) in term order, and reading one row of it seeks
straight to a term. So the terms under a prefix cost one probe each, from
one term to the next, without walking a single doclist (a ``row`` vocabulary
would count every term's documents first). The vocabulary table lives in
the connection's TEMP schema: nothing is written to the file, whoever owns it.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

VOCABULARY = "hermes_terms_{index}"


def terms_under(connection: Connection, index: str, prefix: str, cap: int) -> list[str] | None:
    """The index's terms that start with ``prefix`` (ASCII), in order; None past ``cap`` terms.

    None as well when the vocabulary cannot be read here (the caller then
    keeps the prefix query, which means the same).
    """
    table = VOCABULARY.format(index=index)
    high = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    try:
        # IF NOT EXISTS: a rollback of the unit that made it takes it away again.
        connection.exec_driver_sql(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table} "
            f"USING fts5vocab(main, {index}, 'instance')"
        )
        probe = text(
            f"SELECT term FROM temp.{table} WHERE term >= :p_from AND term < :p_high LIMIT 1"
        )
        terms: list[str] = []
        start = prefix
        while len(terms) <= cap:
            term = connection.execute(probe, {"p_from": start, "p_high": high}).scalar()
            if term is None:
                return terms
            terms.append(term)
            start = term + "\x00"  # the first text after ``term``: its next sibling
    except DBAPIError:
        return None
    return None
