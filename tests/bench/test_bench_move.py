"""The move benchmark's own machinery (``bench.field.move``), at a tiny size.

Its numbers are only worth quoting if each run loads what it claims: the
store's copy and the bare yardstick the whole corpus into the head schema
with its search indexes built, the raw floor the same rows into tables with
no trigger and no index; and if each phase's seconds are the gap since the
phase before, not since the start. Nothing here is timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from bench.field import move
from bench.field.corpus import FieldSpec, build, make_template
from hermes_store import Store
from hermes_store.backends.postgresql import bulk
from hermes_store.backends.postgresql.health import SEARCH_INDEXES
from hermes_store.tools import copy as copy_tool
from tests.conftest import create_pg_database, drop_pg_database, pg_server_url

TINY = FieldSpec(messages=300, sessions=20, seed=11)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("move")
    path = folder / "tiny.db"
    build(TINY, make_template(folder / "template.db"), path, log=lambda _message: None)
    return path


@pytest.fixture
def target() -> Iterator[URL]:
    url = create_pg_database(pg_server_url(), "move")
    Store(url).close()
    try:
        yield url
    finally:
        drop_pg_database(url)


def _one(url: URL, sql: str) -> object:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()


def _indexes(url: URL, table: str) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": table}
            )
            return set(rows.scalars())
    finally:
        engine.dispose()


def test_each_phase_is_the_time_since_the_phase_before() -> None:
    phases = move.Phases()
    phases.marks = [("start", 10.0, "1.0 1 1"), ("rows", 13.0, "2.0 1 1"), ("indexes", 20.0, "3")]
    assert phases.seconds() == {"rows": 3.0, "indexes": 7.0}
    assert phases.loads() == "1.0 / 2.0 / 3"


def test_the_store_run_loads_everything_times_every_phase_and_puts_analyze_back(
    corpus: Path, target: URL
) -> None:
    real = bulk.analyze
    phases = move.Phases()
    move._store(corpus, target, phases)
    assert getattr(copy_tool, "analyze") is real  # noqa: B009
    assert [name for name, _, _ in phases.marks] == ["start", "rows", "indexes", "analyze"]
    assert _one(target, "SELECT count(*) FROM messages") == TINY.messages


def test_the_yardstick_loads_the_same_rows_with_vectors_and_its_search_indexes_built(
    corpus: Path, target: URL
) -> None:
    phases = move.Phases()
    move._bare(target, move._rows(corpus), phases)
    assert [name for name, _, _ in phases.marks] == ["start", "rows", "indexes", "analyze"]
    assert _one(target, "SELECT count(*) FROM messages") == TINY.messages
    assert _one(target, "SELECT count(*) FROM messages WHERE content_tsv IS NULL") == 0
    assert set(SEARCH_INDEXES) <= _indexes(target, "messages")


def test_the_raw_floor_loads_the_same_rows_with_no_trigger_and_no_index(
    corpus: Path, target: URL
) -> None:
    data = move._rows(corpus)
    phases = move.Phases()
    move._raw(target, data, phases)
    assert [name for name, _, _ in phases.marks] == ["start", "rows"]
    assert _one(target, "SELECT count(*) FROM raw_messages") == TINY.messages
    assert _one(target, "SELECT count(*) FROM raw_sessions") == TINY.sessions
    assert _one(target, "SELECT count(*) FROM raw_messages WHERE content_tsv IS NOT NULL") == 0
    assert _indexes(target, "raw_messages") == set()
    triggers = "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'raw_messages'::regclass"
    assert _one(target, triggers) == 0


def test_an_unknown_run_is_refused_by_name() -> None:
    with pytest.raises(SystemExit) as raised:
        move.main(["--url", "postgresql+psycopg://nobody@127.0.0.1:1/x", "--runs", "store,fast"])
    assert raised.value.code == 2
