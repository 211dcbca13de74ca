"""Fill the CJK pair index (revision 0009) from the messages already stored.

The triggers keep the index for every write from then on; this is for the
rows that were there before -- the revision's back-fill -- and for bulk
loads that take the insert triggers off and build each index once at the
end (recovery, the benchmark's corpus). A subquery in FROM cannot see the
outer row in SQLite (no LATERAL), so the triggers' statement cannot be run
over the whole table; Python walks each text once instead, and only the
texts with a non-ASCII character, which are the only ones with a pair.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.engine import Connection

from hermes_store.domain.bigrams import grams

HAS_PAIRS = "length(CAST({text} AS BLOB)) > length({text})"
"""The triggers' cheap test: a text with any non-ASCII character (bytes > characters)."""
BATCH = 2_000


def fill_bigrams(dbapi_connection: sqlite3.Connection, *, replace: bool = False) -> int:
    """Index every message's pairs; returns how many pairs were written.

    Runs on the driver connection inside the caller's transaction (with
    ``executemany``: millions of pairs at field size); ``replace`` empties
    the table first.
    """
    if replace:
        dbapi_connection.execute("DELETE FROM messages_cjk_bigrams")
    last, written = 0, 0
    select = (
        f"SELECT id, content FROM messages WHERE id > ? AND {HAS_PAIRS.format(text='content')} "
        "ORDER BY id LIMIT ?"
    )
    while True:
        rows = dbapi_connection.execute(select, (last, BATCH)).fetchall()
        if not rows:
            return written
        pairs = [(gram, message_id) for message_id, text in rows for gram in grams(text)]
        dbapi_connection.executemany(
            "INSERT OR IGNORE INTO messages_cjk_bigrams (gram, message_id) VALUES (?, ?)", pairs
        )
        written += len(pairs)
        last = rows[-1][0]


def driver_connection(connection: Connection) -> sqlite3.Connection:
    """The ``sqlite3`` connection under a SQLAlchemy one, in the same transaction."""
    driver = connection.connection.driver_connection
    if not isinstance(driver, sqlite3.Connection):
        raise TypeError(f"the CJK pair index is SQLite's; this connection is {type(driver)}")
    return driver
