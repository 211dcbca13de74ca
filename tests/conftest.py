"""Fixtures: every test gets its own real database -- a SQLite file, and PostgreSQL too.

The ``db`` fixture (and ``store_url``, for tests that open their own
``SessionDB`` or ``Store``) is parametrized over both backends:
``test_x[sqlite]`` runs on a fresh ``state.db`` under ``tmp_path``,
``test_x[postgresql]`` on a database of the server named by
``$HERMES_TEST_PG_URL`` (``.ci/run`` starts one). Each xdist worker creates
one database, migrates it once and empties it (``TRUNCATE ... RESTART
IDENTITY``) before every test that uses it, so ids start at 1 as on a new
file; ``pg_fresh_url`` hands out a brand-new empty database for migration
tests.

Tests about SQLite itself (the file, its permissions, WAL and lock
contention, FTS5 internals, files made by the old ``sqlite3`` code) carry
``@pytest.mark.sqlite_only("why")`` and run on SQLite alone; so does any
test that asks for ``db_path``, because it reads the SQLite file directly.

Without ``$HERMES_TEST_PG_URL`` the PostgreSQL variants skip and say why --
except in CI (``$CI`` set), where a missing server is an error, never a skip.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB

PG_URL_ENV = "HERMES_TEST_PG_URL"
PGBOUNCER_URL_ENV = "HERMES_TEST_PGBOUNCER_URL"
BACKENDS = ("sqlite", "postgresql")


class ManualClock:
    """A clock tests move by hand, so ages and ordering are exact."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.001  # strictly increasing, like successive time.time() calls
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ----------------------------------------------------------------------
# backend parametrization
# ----------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sqlite_only(reason): the test is about SQLite itself and runs on the SQLite backend only",
    )


def skip_reason(report: pytest.TestReport) -> str:
    """Why a test was skipped, without pytest's "Skipped: " prefix."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def skip_summary(reports: list[pytest.TestReport], width: int = 60) -> str:
    """One line: how many tests skipped for each reason, most frequent first."""
    counts = Counter(skip_reason(report) for report in reports)
    parts = []
    for reason, count in counts.most_common():
        short = reason if len(reason) <= width else reason[: width - 1] + "…"
        parts.append(f"{count} × {short}")
    return f"skipped {len(reports)}: " + "; ".join(parts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips as one line of counts per reason (``-rfE`` lists failures and errors by name).

    ``-ra`` printed a line per skipped test -- 265 of them without a PostgreSQL
    server, above the summary, hiding the failures among them.
    """
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if skipped:
        terminalreporter.write_line(skip_summary(skipped))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that reaches the ``backend`` fixture once per backend."""
    if "backend" not in metafunc.fixturenames:
        return
    sqlite_only = (
        metafunc.definition.get_closest_marker("sqlite_only") is not None
        or "db_path" in metafunc.fixturenames
    )
    backends = BACKENDS[:1] if sqlite_only else BACKENDS
    metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgresql"``: which backend this variant of the test runs on."""
    return str(getattr(request, "param", "sqlite"))


# ----------------------------------------------------------------------
# PostgreSQL databases
# ----------------------------------------------------------------------
def pg_server_url() -> URL:
    """The test server's URL; skips (locally) or fails (in CI) when there is none."""
    raw = os.environ.get(PG_URL_ENV)
    if raw:
        return make_url(raw)
    if os.environ.get("CI"):
        pytest.fail(
            f"CI is set but ${PG_URL_ENV} is not: .ci/run must start PostgreSQL "
            '(eval "$(bash .ci/postgres.sh start DIR)") before pytest'
        )
    pytest.skip(
        f"no PostgreSQL server configured: set {PG_URL_ENV}=postgresql+psycopg://... "
        "(.ci/postgres.sh start DIR prints one) to run the PostgreSQL variants"
    )


def _admin_engine(server: URL) -> Engine:
    return create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)


def create_pg_database(server: URL, tag: str) -> URL:
    """A new empty database on ``server``; its name is unique to this process."""
    name = f"hermes_t_{tag}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    engine = _admin_engine(server)
    try:
        with engine.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return server.set(database=name)


def drop_pg_database(url: URL) -> None:
    engine = _admin_engine(url.set(database="postgres"))
    try:
        with engine.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def _pg_worker_database() -> Iterator[URL]:
    """One migrated database per xdist worker, dropped when the worker ends."""
    from hermes_store import Store

    url = create_pg_database(pg_server_url(), os.environ.get("PYTEST_XDIST_WORKER", "main"))
    try:
        Store(url).close()  # the Alembic chain, once
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture
def pg_url(_pg_worker_database: URL) -> URL:
    """The worker's PostgreSQL database at head, emptied for this test (ids restart at 1)."""
    engine = create_engine(_pg_worker_database, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '20s'"))
            connection.execute(
                text(
                    "TRUNCATE messages, sessions, state_meta, messages_cjk_bigrams RESTART IDENTITY"
                )
            )
    finally:
        engine.dispose()
    return _pg_worker_database


def pooled(url: URL) -> URL:
    """``url``'s database reached through the test PgBouncer (transaction pooling).

    Skips (locally) or fails (in CI) when no PgBouncer was started: ``.ci/run``
    starts one in front of the test server (``.ci/pgbouncer.sh``).
    """
    raw = os.environ.get(PGBOUNCER_URL_ENV)
    if not raw:
        if os.environ.get("CI"):
            pytest.fail(
                f"CI is set but ${PGBOUNCER_URL_ENV} is not: .ci/run must start PgBouncer "
                '(eval "$(bash .ci/pgbouncer.sh start DIR PORT SERVER_PORT)") before pytest'
            )
        pytest.skip(
            f"no PgBouncer configured: set {PGBOUNCER_URL_ENV}=postgresql+psycopg://... "
            "(.ci/pgbouncer.sh start DIR prints one) to run the pooled variants"
        )
    bouncer = make_url(raw)
    return bouncer.set(database=url.database, query={"pool_mode": "transaction"})


@pytest.fixture(params=["direct", "pgbouncer"])
def pg_route(request: pytest.FixtureRequest) -> Callable[[URL], URL]:
    """How a test reaches its PostgreSQL database: straight, or through PgBouncer."""
    if request.param == "direct":
        return lambda url: url
    return pooled


@pytest.fixture
def pg_fresh_url() -> Iterator[Callable[[], URL]]:
    """Make brand-new empty PostgreSQL databases (no schema); all dropped afterwards."""
    server = pg_server_url()
    made: list[URL] = []

    def make() -> URL:
        made.append(create_pg_database(server, "fresh"))
        return made[-1]

    yield make
    for url in made:
        drop_pg_database(url)


# ----------------------------------------------------------------------
# the store under test
# ----------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test may touch the real ~/.hermes: HERMES_HOME points into tmp_path."""
    home = tmp_path / "hermes-home"
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.delenv("HERMES_STORE_URL", raising=False)
    return home


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The SQLite file; asking for it makes a test SQLite-only (see the module docstring)."""
    return tmp_path / "state.db"


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of this test's empty store on its backend, as ``SessionDB(url)`` takes it."""
    if backend == "postgresql":
        url: URL = request.getfixturevalue("pg_url")
        return url.render_as_string(hide_password=False)
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(store_url: str, clock: ManualClock) -> Iterator[SessionDB]:
    store = SessionDB(store_url, clock=clock)
    try:
        yield store
    finally:
        store.close()
