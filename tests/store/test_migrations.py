"""Old state.db files reach head in place, by every route, losing nothing.

Each legacy file is built by plain ``sqlite3`` the way the old code left it
(``tests/support/legacy_schema.py``), then upgraded through the library
(``upgrade_to_head``) or through the real ``alembic upgrade head`` command,
run from the repository root as a separate process and pointed at the file by
``-x url=``, ``$HERMES_STORE_URL`` or ``$HERMES_HOME``. Afterwards every row
and value must still be there, the lineage intact, and the FTS5 index and its
triggers must work for old rows and new ones. Everything runs on real files
under ``tmp_path``, so the module is safe under ``pytest -n auto``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from hermes_store import Store
from hermes_store.backends import create_store_engine
from hermes_store.backends.location import sqlite_url
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import SchemaError
from hermes_store.schema.migrate import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    alembic_config,
    downgrade,
    is_current,
    read_state,
    revision_for_version,
    script_location,
    stamp,
    upgrade,
    upgrade_to_head,
    version_for_revision,
)
from tests.support.legacy_schema import (
    LEGACY_VERSIONS,
    SEARCH_WORDS,
    build_legacy_db,
    message_columns,
    session_columns,
    snapshot,
)
from tests.support.paths import REPO

pytestmark = pytest.mark.sqlite_only(
    "adoption of state.db files the old sqlite3 code wrote; PostgreSQL: test_pg_schema.py"
)

V6_SESSION_COLUMNS = session_columns(6)
V6_MESSAGE_COLUMNS = message_columns(6)
# ALTER TABLE ADD COLUMN ... DEFAULT 0 gives existing rows the default.
ADDED_COLUMN_DEFAULTS = {"cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0}
DOCUMENTED_TRIGGERS = {"messages_fts_insert", "messages_fts_delete", "messages_fts_update"}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
@pytest.fixture
def engines() -> Iterator[Any]:
    """Engines on files, disposed at the end even when a test fails."""
    made: list[Engine] = []

    def make(path: Path, policy: ContentionPolicy | None = None) -> Engine:
        engine = create_store_engine(sqlite_url(path), policy)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


def run_alembic(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The real ``alembic`` command, from the repository root, in its own process.

    ``$HERMES_HOME`` points into ``tmp_path`` unless the test sets it, so no
    run can reach the machine's real ``~/.hermes``.
    """
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HERMES_STORE_URL", "HERMES_HOME")
    }
    environment["HERMES_HOME"] = str(tmp_path / "unused-hermes-home")
    environment.update(env or {})
    result = subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def raw_state(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]] | None]:
    """The rows of schema_version and alembic_version (None: no such table)."""
    connection = sqlite3.connect(path)
    try:
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        versions = connection.execute("SELECT version FROM schema_version").fetchall()
        revisions = (
            connection.execute("SELECT version_num FROM alembic_version").fetchall()
            if "alembic_version" in tables
            else None
        )
        return versions, revisions
    finally:
        connection.close()


def search(connection: sqlite3.Connection, query: str) -> set[str]:
    """Session ids of the messages the FTS5 index finds for ``query``."""
    return {
        row[0]
        for row in connection.execute(
            "SELECT m.session_id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "WHERE messages_fts MATCH ?",
            (query,),
        )
    }


def assert_healthy(connection: sqlite3.Connection) -> None:
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    # Raises if the FTS index disagrees with the messages it indexes.
    connection.execute("INSERT INTO messages_fts(messages_fts) VALUES('integrity-check')")


def assert_triggers_work(connection: sqlite3.Connection, word: str) -> None:
    """New, changed and deleted rows reach the index: the three triggers fire."""
    (largest,) = connection.execute("SELECT MAX(id) FROM messages").fetchone()
    cursor = connection.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) "
        "VALUES ('sess_child', 'user', ?, 1800000000.0)",
        (f"freshly written {word}",),
    )
    new_id = cursor.lastrowid
    assert new_id is not None and new_id > (largest or 0)
    assert search(connection, word) == {"sess_child"}
    connection.execute(
        "UPDATE messages SET content = ? WHERE id = ?", (f"rewritten {word}x", new_id)
    )
    assert search(connection, word) == set()
    assert search(connection, f"{word}x") == {"sess_child"}
    connection.execute("DELETE FROM messages WHERE id = ?", (new_id,))
    assert search(connection, f"{word}x") == set()
    connection.commit()
    assert_healthy(connection)


def expected_after_upgrade(before: dict[str, dict[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The v6 rows an upgrade must leave: old values kept, new columns at their defaults."""
    columns = {"sessions": V6_SESSION_COLUMNS, "messages": V6_MESSAGE_COLUMNS}
    return {
        table: {
            key: {name: row.get(name, ADDED_COLUMN_DEFAULTS.get(name)) for name in columns[table]}
            for key, row in rows.items()
        }
        for table, rows in before.items()
    }


def restricted(rows_by_table: dict[str, dict[Any, dict[str, Any]]], version: int) -> dict[str, Any]:
    """The rows with only the columns schema ``version`` has (what a downgrade keeps)."""
    columns = {"sessions": session_columns(version), "messages": message_columns(version)}
    return {
        table: {key: {n: row[n] for n in columns[table]} for key, row in rows.items()}
        for table, rows in rows_by_table.items()
    }


def assert_upgraded_intact(path: Path, before: dict[str, dict[Any, dict[str, Any]]]) -> None:
    """Everything the old file held is still there, and the file works as a head store."""
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])
    after = snapshot(path)
    v6_only = {
        table: {
            key: {
                name: row[name]
                for name in (V6_SESSION_COLUMNS if table == "sessions" else V6_MESSAGE_COLUMNS)
            }
            for key, row in rows.items()
        }
        for table, rows in after.items()
    }
    assert v6_only == expected_after_upgrade(before)

    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert_healthy(connection)
        lineage = connection.execute(
            "WITH RECURSIVE lineage AS ("
            " SELECT * FROM sessions WHERE id = 'sess_grandchild'"
            " UNION ALL SELECT s.* FROM sessions s JOIN lineage l ON s.id = l.parent_session_id)"
            " SELECT id FROM lineage"
        ).fetchall()
        assert lineage == [("sess_grandchild",), ("sess_child",), ("sess_root",)]
        for word, sessions in SEARCH_WORDS.items():
            assert search(connection, word) == sessions, word
        # A row written after the upgrade, with the v5/v6 columns, is searchable.
        connection.execute(
            "INSERT INTO messages (session_id, role, content, timestamp, finish_reason, "
            "reasoning, reasoning_details, codex_reasoning_items) "
            "VALUES ('sess_root', 'assistant', 'post upgrade aurora borealis', 1800000000.0, "
            "'stop', 'thinking', '[]', '[]')"
        )
        connection.execute(
            "UPDATE sessions SET cache_read_tokens = cache_read_tokens + 1, title = NULL "
            "WHERE id = 'sess_other'"
        )
        connection.commit()
        assert search(connection, "aurora") == {"sess_root"}
        assert_triggers_work(connection, "nebula")
        titled = connection.execute("SELECT title FROM sessions WHERE title IS NOT NULL").fetchone()
        if titled is not None:  # the unique partial index is in force
            with pytest.raises(sqlite3.IntegrityError):
                connection.execute("UPDATE sessions SET title = ? WHERE id = 'sess_other'", titled)
    finally:
        connection.close()


def file_state(path: Path) -> dict[str, Any]:
    """Bytes and mtime of the database and its WAL: what "nothing written" means."""
    state: dict[str, Any] = {}
    for suffix in ("", "-wal"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            state[suffix or "db"] = (
                hashlib.sha256(candidate.read_bytes()).hexdigest(),
                candidate.stat().st_mtime_ns,
            )
        else:
            state[suffix or "db"] = None
    return state


# ---------------------------------------------------------------------------
# the revision chain and the library's view of it
# ---------------------------------------------------------------------------
def test_revision_chain_is_linear_and_documented() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [HEAD_REVISION]
    chain = list(reversed(list(script.walk_revisions())))
    numbers = [int(r.revision) for r in chain]
    assert numbers == list(range(1, int(HEAD_REVISION) + 1))
    for position, revision in enumerate(chain):
        assert revision.down_revision == (None if position == 0 else chain[position - 1].revision)
        number = int(revision.revision)
        doc = revision.module.__doc__ or ""
        if number <= 6:  # the design document's versions
            assert doc.startswith(f"Schema version {number}:")
        else:  # ours: known by the revision alone, schema_version stays the document's 6
            assert doc.startswith("Our addition (schema_version stays 6):")
    assert HEAD_SCHEMA_VERSION == 6
    assert version_for_revision(HEAD_REVISION) == HEAD_SCHEMA_VERSION
    assert [version_for_revision(f"{n:04d}") for n in range(1, 9)] == [1, 2, 3, 4, 5, 6, 6, 6]
    assert all(version_for_revision(r.revision) == 6 for r in chain[6:])
    assert [revision_for_version(v) for v in LEGACY_VERSIONS] == [
        "0001",
        "0002",
        "0003",
        "0004",
        "0005",
        "0006",
    ]


@pytest.mark.parametrize("route", ["library", "alembic -x url"])
def test_a_file_stamped_7_by_an_older_hermes_store_goes_back_to_6(
    tmp_path: Path, engines: Any, route: str
) -> None:
    """Older releases stamped schema_version 7 with revision 0007; the agent reads 7 otherwise."""
    path = tmp_path / "state.db"
    build_legacy_db(path, 6)
    before = snapshot(path)
    engine = engines(path)
    upgrade(engine, "0007")
    _set(path, "UPDATE schema_version SET version = 7")  # what 0007 used to write
    assert raw_state(path) == ([(7,)], [("0007",)])
    assert not is_current(engine)

    if route == "library":
        upgrade_to_head(engine)
    else:
        run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head")

    assert_upgraded_intact(path, before)


def test_scripts_ship_as_a_package() -> None:
    """The wheel maps migrations/ to hermes_store._migrations: both need __init__.py."""
    location = Path(script_location())
    assert (location / "env.py").is_file()
    assert (location / "__init__.py").is_file()
    assert (location / "versions" / "__init__.py").is_file()
    assert (REPO / "migrations" / "__init__.py").is_file()
    assert (REPO / "migrations" / "versions" / "__init__.py").is_file()
    spec = importlib.util.find_spec("hermes_store._migrations")
    if spec is not None:  # installed (editable or not): the package is what is used
        assert spec.submodule_search_locations is not None
        assert Path(next(iter(spec.submodule_search_locations))).resolve() == location.resolve()


# ---------------------------------------------------------------------------
# legacy files, every version, every route
# ---------------------------------------------------------------------------
ROUTES = ("library", "alembic -x url", "alembic HERMES_STORE_URL", "alembic HERMES_HOME")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_file_upgrades_in_place(
    tmp_path: Path, engines: Any, version: int, route: str
) -> None:
    home = tmp_path / "agent-home"
    home.mkdir()
    path = home / "state.db"
    build_legacy_db(path, version)
    before = snapshot(path)
    assert raw_state(path) == ([(version,)], None)

    if route == "library":
        upgrade_to_head(engines(path))
    elif route == "alembic -x url":
        run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head")
    elif route == "alembic HERMES_STORE_URL":
        run_alembic(tmp_path, "upgrade", "head", env={"HERMES_STORE_URL": f"sqlite:///{path}"})
    else:  # the default location, $HERMES_HOME/state.db
        run_alembic(tmp_path, "upgrade", "head", env={"HERMES_HOME": str(home)})

    assert_upgraded_intact(path, before)


@pytest.mark.parametrize("created_at", [1, 2, 4])
def test_file_the_old_code_migrated_itself_upgrades(
    tmp_path: Path, engines: Any, created_at: int
) -> None:
    """Files made by an old version and brought to v6 by the old code's own ALTERs."""
    path = tmp_path / "state.db"
    build_legacy_db(path, 6, created_at=created_at)
    before = snapshot(path)
    upgrade_to_head(engines(path))
    assert_upgraded_intact(path, before)


PARTIAL = {
    # A crash between the old code's ALTER TABLE and its UPDATE schema_version.
    "v1 with finish_reason": (
        1,
        ["ALTER TABLE messages ADD COLUMN finish_reason TEXT"],
        ["UPDATE messages SET finish_reason = 'length' WHERE id = 2"],
    ),
    "v3 with the title index": (
        3,
        [
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
            "ON sessions(title) WHERE title IS NOT NULL"
        ],
        [],
    ),
    "v4 half way through the billing columns": (
        4,
        [
            "ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER DEFAULT 0",
            "ALTER TABLE sessions ADD COLUMN billing_provider TEXT",
        ],
        [
            "UPDATE sessions SET cache_read_tokens = 77, billing_provider = 'anthropic' "
            "WHERE id = 'sess_root'"
        ],
    ),
    "v5 with one reasoning column": (
        5,
        ["ALTER TABLE messages ADD COLUMN reasoning TEXT"],
        ["UPDATE messages SET reasoning = 'kept thought' WHERE id = 5"],
    ),
}


@pytest.mark.parametrize("case", PARTIAL)
@pytest.mark.parametrize("route", ["library", "alembic -x url"])
def test_partially_migrated_legacy_file(
    tmp_path: Path, engines: Any, case: str, route: str
) -> None:
    version, ddl, writes = PARTIAL[case]
    path = tmp_path / "state.db"
    build_legacy_db(path, version)
    connection = sqlite3.connect(path)
    for statement in [*ddl, *writes]:
        connection.execute(statement)
    connection.commit()
    connection.close()
    before = snapshot(path)
    assert raw_state(path) == ([(version,)], None)

    if route == "library":
        upgrade_to_head(engines(path))
    else:
        run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head")

    assert_upgraded_intact(path, before)


def test_two_openers_of_one_old_file_adopt_it_once(tmp_path: Path, engines: Any) -> None:
    """Adoption runs inside the upgrade's write transaction: the loser finds it done."""
    path = tmp_path / "state.db"
    build_legacy_db(path, 2)
    before = snapshot(path)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def opener() -> None:
        engine = engines(path)
        start.wait()
        try:
            upgrade_to_head(engine)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=opener) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert_upgraded_intact(path, before)


# ---------------------------------------------------------------------------
# downgrades
# ---------------------------------------------------------------------------
def _schema_at(connection: sqlite3.Connection) -> dict[str, Any]:
    names = {
        kind: {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
        }
        for kind in ("table", "index", "trigger")
    }
    (messages_sql,) = connection.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'messages'"
    ).fetchone()
    return {
        "sessions": {r[1] for r in connection.execute("PRAGMA table_info(sessions)")},
        "messages": {r[1] for r in connection.execute("PRAGMA table_info(messages)")},
        "names": names,
        "autoincrement": "AUTOINCREMENT" in messages_sql.upper(),
    }


def test_downgrade_step_by_step_keeps_data_and_search_then_upgrades_again(
    tmp_path: Path, engines: Any
) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 6)
    before = snapshot(path)
    engine = engines(path)
    upgrade_to_head(engine)

    for version in range(HEAD_SCHEMA_VERSION - 1, 0, -1):
        revision = revision_for_version(version)
        downgrade(engine, revision)
        assert raw_state(path) == ([(version,)], [(revision,)])
        connection = sqlite3.connect(path)
        try:
            schema = _schema_at(connection)
            if version <= 6:
                # The schema the old code of that version would have: it can open the file.
                assert schema["sessions"] == set(session_columns(version))
                assert schema["messages"] == set(message_columns(version))
            assert ("idx_sessions_title_unique" in schema["names"]["index"]) == (version >= 4)
            assert schema["names"]["trigger"] >= DOCUMENTED_TRIGGERS
            assert {"messages_fts", "sqlite_sequence"} <= schema["names"]["table"]
            assert schema["autoincrement"], "a table rebuild would have dropped AUTOINCREMENT"
            kept = snapshot(path)
            for table, rows in before.items():
                assert kept[table].keys() == rows.keys()
                for key, row in rows.items():
                    assert kept[table][key] == {n: row[n] for n in kept[table][key]}
            for word, sessions in SEARCH_WORDS.items():
                assert search(connection, word) == sessions
            assert_triggers_work(connection, f"quasar{version}")
        finally:
            connection.close()

    # Back up from 0001: the surviving data is untouched, dropped columns return empty.
    upgrade_to_head(engine)
    assert_upgraded_intact(path, restricted(before, version=1))

    downgrade(engine, "base")
    connection = sqlite3.connect(path)
    try:
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        # sqlite_sequence, AUTOINCREMENT's bookkeeping, cannot be dropped; all else is gone.
        assert tables == {"alembic_version", "sqlite_sequence"}
        assert connection.execute("SELECT * FROM alembic_version").fetchall() == []
    finally:
        connection.close()

    upgrade_to_head(engine)
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT COUNT(*) FROM sessions").fetchone() == (0,)
        connection.execute(
            "INSERT INTO sessions (id, source, started_at) VALUES ('sess_child', 'cli', 1.0)"
        )
        connection.commit()
        assert_triggers_work(connection, "phoenix")
    finally:
        connection.close()


def test_alembic_command_line_downgrades_and_upgrades(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 5)
    before = snapshot(path)
    url = f"url=sqlite:///{path}"
    run_alembic(tmp_path, "-x", url, "upgrade", "head")
    run_alembic(tmp_path, "-x", url, "downgrade", "0003")
    assert raw_state(path) == ([(3,)], [("0003",)])
    run_alembic(tmp_path, "-x", url, "downgrade", "-1")
    assert raw_state(path) == ([(2,)], [("0002",)])
    run_alembic(tmp_path, "-x", url, "upgrade", "head")
    current = run_alembic(tmp_path, "-x", url, "current").stdout
    assert f"{HEAD_REVISION} (head)" in current
    # Titles and billing went with their columns; everything older survived.
    assert_upgraded_intact(path, restricted(before, version=2))


def test_stamp_keeps_schema_version_in_step(tmp_path: Path, engines: Any) -> None:
    path = tmp_path / "state.db"
    engine = engines(path)
    upgrade_to_head(engine)
    stamp(engine, "0004")
    assert raw_state(path) == ([(4,)], [("0004",)])
    assert not is_current(engine)
    upgrade_to_head(engine)  # re-runs 0005.. idempotently over the existing columns
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])


def test_schema_version_drift_is_mended_on_upgrade(tmp_path: Path, engines: Any) -> None:
    """An old program can bump or reset schema_version behind Alembic's back."""
    path = tmp_path / "state.db"
    engine = engines(path)
    upgrade_to_head(engine)
    connection = sqlite3.connect(path)
    connection.execute("UPDATE schema_version SET version = 3")
    connection.commit()
    connection.close()
    assert not is_current(engine)
    upgrade_to_head(engine)
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])
    assert is_current(engine)


# ---------------------------------------------------------------------------
# fresh files
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["missing folder", "empty file"])
def test_alembic_upgrade_head_on_a_fresh_file_reaches_head(tmp_path: Path, kind: str) -> None:
    if kind == "missing folder":
        path = tmp_path / "not" / "yet" / "state.db"
    else:
        path = tmp_path / "state.db"
        path.touch()
    run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head")
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])
    if kind == "missing folder":  # env.py made it, private: it will hold conversations
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        connection.execute(
            "INSERT INTO sessions (id, source, started_at) VALUES ('sess_child', 'cli', 1.0)"
        )
        connection.commit()
        assert_triggers_work(connection, "pulsar")
    finally:
        connection.close()


@pytest.mark.parametrize("version", range(1, HEAD_SCHEMA_VERSION + 1))
def test_offline_sql_of_each_revision_leaves_its_own_schema_version(
    tmp_path: Path, version: int
) -> None:
    """``alembic upgrade 000N --sql`` applied to a file gives schema version N, for every N.

    Online, env.py mends ``schema_version`` after each command, which would hide
    a revision writing the wrong number; offline SQL is run as it is.
    """
    target = tmp_path / "offline.db"
    buffer = io.StringIO()
    config = alembic_config(url=f"sqlite:///{target}")
    config.output_buffer = buffer
    command.upgrade(config, revision_for_version(version), sql=True)
    assert not target.exists(), "offline mode must not open the database"
    with closing(sqlite3.connect(target)) as connection:
        connection.executescript(buffer.getvalue())
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(version,)]
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (revision_for_version(version),)
        ]


def test_a_file_whose_revision_moved_while_schema_version_stayed_is_not_current(
    tmp_path: Path,
) -> None:
    """The open's "is this file current?" read asks for both; here only the revision is behind."""
    path = tmp_path / "state.db"
    Store(path).close()
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0006'")
        connection.commit()
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [("0006",)])
    Store(path).close()  # opening upgrades what is not current
    assert raw_state(path) == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])


def test_alembic_default_location_is_created_under_hermes_home(tmp_path: Path) -> None:
    home = tmp_path / "brand-new-home"
    run_alembic(tmp_path, "upgrade", "head", env={"HERMES_HOME": str(home)})
    assert raw_state(home / "state.db") == ([(HEAD_SCHEMA_VERSION,)], [(HEAD_REVISION,)])


def test_library_upgrade_of_a_new_file(tmp_path: Path, engines: Any) -> None:
    path = tmp_path / "state.db"
    engine = engines(path)
    assert not is_current(engine)
    upgrade_to_head(engine)
    assert is_current(engine)
    with engine.connect().execution_options(hermes_read=True) as connection:
        assert read_state(connection) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)


def test_alembic_current_on_an_old_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 4)
    before = file_state(path)
    run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "current")
    assert raw_state(path) == ([(4,)], None)
    assert file_state(path) == before


# ---------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------
def _set(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


@pytest.mark.parametrize("origin", ["the old code's v6", "hermes_store at head"])
def test_a_file_at_the_agents_schema_version_is_never_migrated(
    tmp_path: Path, engines: Any, origin: str
) -> None:
    """schema_version 7 and up is the agent's own ladder: no revision of ours runs on it."""
    path = tmp_path / "state.db"
    if origin == "hermes_store at head":
        first = create_store_engine(sqlite_url(path))
        upgrade_to_head(first)
        first.dispose()  # the last connection closes: the WAL is checkpointed away
    else:
        build_legacy_db(path, 6)
    agent_version = HEAD_SCHEMA_VERSION + 1
    _set(path, f"UPDATE schema_version SET version = {agent_version}")
    state = raw_state(path)
    before = file_state(path)

    assert is_current(engines(path))
    upgrade_to_head(engines(path))
    run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head")

    assert raw_state(path) == state  # not stamped, not lowered
    assert file_state(path)["db"] == before["db"]


def test_unknown_alembic_revision_is_refused(tmp_path: Path, engines: Any) -> None:
    path = tmp_path / "state.db"
    engine = engines(path)
    upgrade_to_head(engine)
    _set(path, "UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(SchemaError, match="'9999'"):
        upgrade_to_head(engine)
    result = run_alembic(tmp_path, "-x", f"url=sqlite:///{path}", "upgrade", "head", check=False)
    assert result.returncode != 0 and "SchemaError" in result.stderr


def test_sessions_without_any_version_is_refused(tmp_path: Path, engines: Any) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 3)
    _set(path, "DROP TABLE schema_version")
    with pytest.raises(SchemaError, match="refusing to guess"):
        upgrade_to_head(engines(path))


# ---------------------------------------------------------------------------
# opening a current database writes nothing
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("origin", ["fresh", "legacy v3"])
def test_opening_a_current_database_writes_nothing(
    tmp_path: Path, engines: Any, origin: str
) -> None:
    path = tmp_path / "state.db"
    if origin != "fresh":
        build_legacy_db(path, 3)
    first = create_store_engine(sqlite_url(path))
    upgrade_to_head(first)
    first.dispose()  # the last connection closes: the WAL is checkpointed away
    before = file_state(path)

    engine = engines(path)
    upgrade_to_head(engine)
    assert is_current(engine)
    engine.dispose()

    assert file_state(path) == before


def test_opening_a_current_database_commits_nothing_beside_a_reader(
    tmp_path: Path, engines: Any
) -> None:
    """With another connection open the WAL stays; it and data_version must not move."""
    path = tmp_path / "state.db"
    upgrade_to_head(engines(path))
    observer = sqlite3.connect(path, isolation_level=None)
    try:
        observer.execute("SELECT COUNT(*) FROM sessions").fetchone()
        (data_version,) = observer.execute("PRAGMA data_version").fetchone()
        before = file_state(path)

        engine = engines(path)
        upgrade_to_head(engine)
        engine.dispose()

        assert observer.execute("PRAGMA data_version").fetchone() == (data_version,)
        assert file_state(path) == before
    finally:
        observer.close()


def test_opening_a_current_database_does_not_wait_for_the_write_lock(
    tmp_path: Path, engines: Any
) -> None:
    """Deciding that nothing is to be done is a read: a busy writer does not block it."""
    path = tmp_path / "state.db"
    upgrade_to_head(engines(path))
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        impatient = engines(path, ContentionPolicy(patience_s=0, busy_timeout_ms=0))
        upgrade_to_head(impatient)  # would raise StoreLockedError if it asked for the lock
        writer.execute("ROLLBACK")
    finally:
        writer.close()


def test_upgrade_of_an_old_file_is_one_transaction(tmp_path: Path, engines: Any) -> None:
    """A failing step leaves the old file exactly as it was, still at its old version.

    The file is at v1 but already carries v3's ``title`` (a crash before the
    bump) with a duplicate title: 0002 adds ``finish_reason``, 0003 skips
    ``title``, and 0004 cannot build the unique index. 0002's ALTER and the
    adoption stamp must be rolled back with it.
    """
    path = tmp_path / "state.db"
    build_legacy_db(path, 1)
    _set(
        path,
        "ALTER TABLE sessions ADD COLUMN title TEXT",
        "UPDATE sessions SET title = 'Same title' WHERE id IN ('sess_root', 'sess_other')",
    )
    before = snapshot(path)
    with pytest.raises(Exception, match="UNIQUE"):
        upgrade_to_head(engines(path))
    assert raw_state(path) == ([(1,)], None)
    assert snapshot(path) == before
    connection = sqlite3.connect(path)
    try:
        columns = [r[1] for r in connection.execute("PRAGMA table_info(messages)")]
        assert columns == message_columns(1)
        assert_healthy(connection)
    finally:
        connection.close()
