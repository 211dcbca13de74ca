"""A populated PostgreSQL store for the word-vector revisions' tests (0014, 0021).

Both revisions rewrite the vectors of a table that already holds messages
while writers go on; their tests need the same things: a store at a given
revision holding rows made by one statement, the count of rows whose vector
is stale, and a writer appending (and perhaps editing) in a thread while the
upgrade runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine

from hermes_store.backends import create_store_engine
from hermes_store.backends.postgresql.word_index import VECTOR_EXPRESSION
from hermes_store.schema.migrate import upgrade


@dataclass(frozen=True)
class VectorCorpus:
    """``messages`` rows numbered ``n`` made by ``messages_sql`` over ``:a`` .. ``:b``."""

    sessions: int
    messages: int
    messages_sql: str

    def rows(self, engine: Engine, first: int, last: int) -> None:
        with engine.begin() as connection:
            connection.execute(text(self.messages_sql), {"a": first, "b": last})

    def populated(self, url: URL, revision: str) -> Engine:
        """A store at ``revision`` holding the sessions and the first ``messages`` rows."""
        engine = create_store_engine(url)
        upgrade(engine, revision)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO sessions (id, source, started_at, model, message_count) "
                    "SELECT 's' || n, 'cli', n, 'model-' || (n % 2), 0 "
                    "FROM generate_series(1, :sessions) AS n"
                ),
                {"sessions": self.sessions},
            )
        self.rows(engine, 1, self.messages)
        return engine


def stale(connection: Connection, expression: str = VECTOR_EXPRESSION) -> int:
    """Messages whose stored vector is not ``expression`` of their text (missing ones too)."""
    return int(
        connection.execute(
            text(f"SELECT count(*) FROM messages WHERE content_tsv IS DISTINCT FROM {expression}")
        ).scalar_one()
    )


@dataclass
class Writer:
    """What the writer thread did: the rows it appended and what it raised."""

    appended: list[int] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)


@contextmanager
def writing(
    url: URL, corpus: VectorCorpus, edit: Callable[[Connection, int], None] | None = None
) -> Iterator[Writer]:
    """A thread appending one row at a time (then ``edit``, if any) until the block ends."""
    done = threading.Event()
    writer = Writer()

    def write() -> None:
        other = create_store_engine(url)
        try:
            n = corpus.messages
            while not done.is_set():
                n += 1
                corpus.rows(other, n, n)
                if edit is not None:
                    with other.begin() as connection:
                        edit(connection, n)
                writer.appended.append(n)
        except BaseException as failed:  # reported in the test's thread
            writer.failures.append(failed)
        finally:
            other.dispose()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        yield writer
    finally:
        done.set()
        thread.join(timeout=60)
