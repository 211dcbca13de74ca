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

from collections.abc import Callable

from sqlalchemy.engine import Connection

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.bigrams import grams

HAS_PAIRS = "length(CAST({text} AS BLOB)) > length({text})"
"""The triggers' cheap test: a text with any non-ASCII character (bytes > characters)."""
BATCH = 2_000


def pair_triggers(grams_of: Callable[[str], str]) -> dict[str, str]:
    """The three triggers that keep the pair index, by name, around a revision's cut.

    ``grams_of(text)`` is the revision's statement that lists the distinct
    pairs of the SQL expression ``text`` as ``gram`` (0009 and 0012 cut the
    text differently); what the triggers do with those rows never changed.
    """

    def has_pairs(row: str) -> str:
        return HAS_PAIRS.format(text=f"{row}.content")

    def insert(row: str) -> str:
        return (
            "INSERT OR IGNORE INTO messages_cjk_bigrams (gram, message_id) "
            f"SELECT gram, {row}.id FROM ({grams_of(f'{row}.content')});"
        )

    def delete(row: str) -> str:
        return (
            f"DELETE FROM messages_cjk_bigrams WHERE message_id = {row}.id "
            f"AND gram IN ({grams_of(f'{row}.content')});"
        )

    return {
        "messages_cjk_bigrams_insert": f"""
CREATE TRIGGER IF NOT EXISTS messages_cjk_bigrams_insert AFTER INSERT ON messages
WHEN {has_pairs("new")} BEGIN
    {insert("new")}
END
""",
        "messages_cjk_bigrams_delete": f"""
CREATE TRIGGER IF NOT EXISTS messages_cjk_bigrams_delete AFTER DELETE ON messages
WHEN {has_pairs("old")} BEGIN
    {delete("old")}
END
""",
        "messages_cjk_bigrams_update": f"""
CREATE TRIGGER IF NOT EXISTS messages_cjk_bigrams_update AFTER UPDATE OF id, content ON messages
WHEN {has_pairs("old")} OR {has_pairs("new")} BEGIN
    {delete("old")}
    {insert("new")}
END
""",
    }


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
