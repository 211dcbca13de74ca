"""Damaged pages are named: every operation that meets them raises ``StoreCorruptError``.

Drills on real files: a store is written through the library, checkpointed,
and then whole pages of it are overwritten with random bytes (as a bad disk or
a torn copy leaves them). No operation may answer "not found", return a wrong
empty result, or report a delete that did not happen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.ops.damage import dbstat_rows, overwrite_pages, pages_of
from hermes_store import (
    SessionDB,
    SessionNotFoundError,
    Store,
    StoreCorruptError,
    StoreError,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn
from hermes_store.domain.usage import UsageReport
from hermes_store.tools.check import check
from hermes_store.uow.corruption import is_corruption
from tests.support.paths import REPO

pytestmark = pytest.mark.sqlite_only("damaged pages of a SQLite file")

SESSIONS = 30
MESSAGES = 40

# Every table and index the facade reads sessions and messages through (the
# FTS tables stay whole: search must still fail, on the rows it finds).
ROW_TREES = (
    "sessions",
    "messages",
    "idx_messages_session",
    "sqlite_autoindex_sessions_1",
    "idx_sessions_source",
    "idx_sessions_parent",
    "idx_sessions_started",
    "idx_sessions_title_unique",
    # revision 0010's: a covering index would otherwise answer a report whole
    "idx_sessions_listing",
    "idx_sessions_source_listing",
    "idx_sessions_title_family",
    "idx_sessions_usage",
    "idx_sessions_total_tokens",
    # revision 0011's: a page of root sessions walks these
    "idx_sessions_roots_listing",
    "idx_sessions_roots_source_listing",
    # revision 0013's: a filtered search reads a match's role and session here
    "idx_messages_search_filter",
    # revision 0016's: the default listing and count, the pinned sessions; and state_meta,
    # the upkeep marks read before any prune
    "idx_sessions_live_roots_listing",
    "idx_sessions_live_roots_source_listing",
    "idx_sessions_archived",
    "idx_sessions_pinned",
    "state_meta",
    "sqlite_autoindex_state_meta_1",
    # revision 0011's totals, kept from these rows and read instead of them
    "message_total",
    "model_usage_totals",
)
"""Every b-tree of session and message rows: the tables, their indexes, the totals kept."""


def build_store(path: Path) -> None:
    """30 titled sessions of 40 messages each, checkpointed into the main file."""
    db = SessionDB(path, durability="normal")
    for i in range(SESSIONS):
        db.create_session(f"s{i}", "cli", model="m", parent_session_id="s0" if i else None)
        db.set_session_title(f"s{i}", f"title {i}")
        db.append_messages(
            f"s{i}",
            [{"role": "user", "content": f"hello world {i} {j} " * 6} for j in range(MESSAGES)],
        )
    db.close()
    checkpoint(path)


def checkpoint(path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "state.db"
    build_store(path)
    return path


def damaged_copy(pristine: Path, target: Path, trees: tuple[str, ...]) -> list[int]:
    target.write_bytes(pristine.read_bytes())
    if trees == ROW_TREES:  # the list is whole: a new index must be added to it
        assert set(trees) == set(row_trees_of(pristine)), "ROW_TREES is out of date"
    os.chmod(target, 0o600)
    return overwrite_pages(target, pages_of(pristine, trees), seed=7)


def row_trees_of(path: Path) -> list[str]:
    """The b-trees of ``sessions`` and ``messages`` the file holds, the totals kept of them,
    and ``state_meta`` (the upkeep marks)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name IN ('sessions', 'messages', "
            "'message_total', 'model_usage_totals', 'state_meta') AND type IN ('table', 'index')"
        ).fetchall()
    finally:
        connection.close()
    return [name for (name,) in rows]


def public_calls(db: SessionDB) -> dict[str, Callable[[], Any]]:
    """One call of every public method, each on a session or title that exists."""
    return {
        "create_session": lambda: db.create_session("new", "cli"),
        "ensure_session": lambda: db.ensure_session("new2"),
        "resolve_session_id": lambda: db.resolve_session_id("s"),
        "get_compression_tip": lambda: db.get_compression_tip("s0"),
        "end_session": lambda: db.end_session("s1", "user_exit"),
        "reopen_session": lambda: db.reopen_session("s1"),
        "update_system_prompt": lambda: db.update_system_prompt("s1", "be brief"),
        "update_token_counts": lambda: db.update_token_counts("s1", 10, 5),
        "get_session": lambda: db.get_session("s1"),
        "set_session_title": lambda: db.set_session_title("s1", "renamed"),
        "get_session_title": lambda: db.get_session_title("s1"),
        "get_session_by_title": lambda: db.get_session_by_title("title 1"),
        "resolve_session_by_title": lambda: db.resolve_session_by_title("title 1"),
        "get_next_title_in_lineage": lambda: db.get_next_title_in_lineage("title 1"),
        "append_message": lambda: db.append_message("s1", "user", "more"),
        "append_messages": lambda: db.append_messages("s1", [{"role": "user", "content": "x"}]),
        "get_messages": lambda: db.get_messages("s1"),
        "get_messages_as_conversation": lambda: db.get_messages_as_conversation("s1"),
        "clear_messages": lambda: db.clear_messages("s1"),
        "message_count": lambda: db.message_count(),
        "search_messages": lambda: db.search_messages("hello"),
        "search_sessions": lambda: db.search_sessions(),
        "list_sessions_rich": lambda: db.list_sessions_rich(),
        "session_count": lambda: db.session_count(),
        "get_ancestors": lambda: db.get_ancestors("s1"),
        "get_descendants": lambda: db.get_descendants("s0"),
        "token_usage_by_model": lambda: db.token_usage_by_model(),
        "top_sessions_by_tokens": lambda: db.top_sessions_by_tokens(),
        "export_session": lambda: db.export_session("s1"),
        "export_all": lambda: db.export_all(),
        "iter_export": lambda: list(db.iter_export()),
        "prune_sessions": lambda: db.prune_sessions(0),
        "delete_session": lambda: db.delete_session("s1"),
        "get_messages_around": lambda: db.get_messages_around(1),
        "session_count_ge": lambda: db.session_count_ge(1),
        "search_sessions_by_id": lambda: db.search_sessions_by_id("s1"),
        "set_session_archived": lambda: db.set_session_archived("s1", True),
        "set_session_pinned": lambda: db.set_session_pinned("s1", True),
        "archive_stale_sessions": lambda: db.archive_stale_sessions(0),
        "delete_sessions": lambda: db.delete_sessions(["s1", "s2"]),
        "count_empty_sessions": lambda: db.count_empty_sessions(0),
        "delete_empty_sessions": lambda: db.delete_empty_sessions(0),
        "get_meta": lambda: db.get_meta("k"),
        "set_meta": lambda: db.set_meta("k", "v"),
        "vacuum": lambda: db.vacuum(),
        "maybe_auto_prune_and_vacuum": lambda: db.maybe_auto_prune_and_vacuum(0, 0),
        "append": lambda: db.append("s1", MessageIn("user", "more")),
        "record_usage": lambda: db.record_usage("s1", UsageReport(input_tokens=10)),
    }


# Not operations on the data: closing, the store handle, a pure text helper, a constant.
NOT_DATA = {"close", "store", "sanitize_title", "MAX_TITLE_LENGTH"}


def test_the_drill_covers_every_public_method(tmp_path: Path) -> None:
    db = SessionDB(tmp_path / "state.db")
    public = {name for name in dir(SessionDB) if not name.startswith("_")} - NOT_DATA
    assert set(public_calls(db)) == public
    db.close()


def test_every_public_read_and_write_raises_the_named_error(pristine: Path, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    damaged_copy(pristine, path, ROW_TREES)
    db = SessionDB(path)  # the schema pages are whole: the store opens
    for name, call in public_calls(db).items():
        with pytest.raises(StoreCorruptError) as raised:
            call()
        error = raised.value
        assert not isinstance(error, LookupError), name
        assert isinstance(error, StoreError), name
        message = str(error)
        assert str(path) in message, name
        assert "hermes-store recover" in message and "hermes-store backup" in message, name
        assert "malformed" in message, name
    db.close()


def test_a_delete_that_meets_a_damaged_page_does_not_report_success(
    pristine: Path, tmp_path: Path
) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(pristine.read_bytes())
    # The one page of messages holding s5's first message: its session row stays whole.
    connection = sqlite3.connect(path)
    (victim,) = connection.execute(
        "SELECT MIN(id) FROM messages WHERE session_id = 's5'"
    ).fetchone()
    connection.close()
    page = _leaf_holding(path, victim)
    overwrite_pages(path, [page], seed=3)

    db = SessionDB(path)
    with pytest.raises(StoreCorruptError):
        db.delete_session("s5")
    with pytest.raises(StoreCorruptError):
        db.get_messages("s5")
    assert db.get_session("s5") is not None, "the failed delete removed the session"
    # What lies on other pages is still served: the store is not refused whole.
    healthy = db.get_messages("s29")
    assert len(healthy) == MESSAGES
    with pytest.raises(StoreCorruptError):
        db.clear_messages("s5")
    assert db.get_session("s5")["message_count"] == MESSAGES, "a failed clear changed counters"
    db.close()


def _leaf_holding(path: Path, rowid: int) -> int:
    """The leaf page of ``messages`` that holds ``rowid`` (read before the damage)."""
    leaves = dbstat_rows(
        path,
        "SELECT pageno, ncell FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' "
        "ORDER BY path",
    )
    connection = sqlite3.connect(path)
    try:
        (ordinal,) = connection.execute(
            "SELECT COUNT(*) FROM messages WHERE id <= ?", (rowid,)
        ).fetchone()
    finally:
        connection.close()
    # dbstat lists leaves in key order; the cell counts tell where rowid falls.
    before = 0
    for page, cells in leaves:
        if before < ordinal <= before + int(str(cells)):
            return int(str(page))
        before += int(str(cells))
    raise AssertionError(f"no leaf holds rowid {rowid}")


def test_a_file_whose_header_is_damaged_is_named_at_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_store(path)
    with path.open("r+b") as handle:
        handle.write(os.urandom(100))
    with pytest.raises(StoreCorruptError) as raised:
        SessionDB(path)
    assert str(path) in str(raised.value)


def test_the_classifier_answers_for_damage_only(pristine: Path, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    damaged_copy(pristine, path, ("messages",))
    connection = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError) as damaged:
        connection.execute("SELECT COUNT(content) FROM messages").fetchone()
    connection.close()
    assert is_corruption(damaged.value)
    healthy = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError) as missing:
        healthy.execute("SELECT * FROM no_such_table")
    assert not is_corruption(missing.value)
    assert not is_corruption(SessionNotFoundError("s1"))
    psycopg_errors = pytest.importorskip("psycopg.errors")
    assert is_corruption(psycopg_errors.DataCorrupted("could not read block 7"))
    assert is_corruption(psycopg_errors.IndexCorrupted("index is corrupted"))
    assert not is_corruption(psycopg_errors.LockNotAvailable("lock timeout"))


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HERMES_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def test_check_reports_which_trees_are_damaged_and_what_still_reads(
    pristine: Path, tmp_path: Path
) -> None:
    path = tmp_path / "state.db"
    pages = damaged_copy(pristine, path, ("messages",))
    before = path.read_bytes()
    store = Store(path, migrate=False)
    report = check(store, repair=True)
    store.close()
    assert path.read_bytes() == before, "check --repair wrote to a damaged file"
    assert not report.ok and report.damage is not None
    assert report.repaired_counters == 0 and not report.rebuilt_fts
    damaged = {tree.name: tree for tree in report.damage.trees}
    assert set(damaged) == {"messages"}
    # The root itself is overwritten: the walk sees it damaged and reaches nothing below.
    assert damaged["messages"].damaged_pages == [min(pages)]
    assert report.damage.messages_readable == 0, "every page of messages was overwritten"
    assert report.damage.messages_claimed == SESSIONS * MESSAGES
    assert report.damage.messages_indexed == SESSIONS * MESSAGES
    assert report.damage.sessions_readable == report.damage.sessions_claimed == SESSIONS
    assert "hermes-store recover" in report.damage.next_step

    done = cli(tmp_path, "check", "--db", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "damaged tables and indexes" in done.stdout and "messages" in done.stdout
    assert f"hermes-store recover --from {path}" in done.stdout


def test_backup_and_recover_from_the_command_line(pristine: Path, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(pristine.read_bytes())
    os.chmod(path, 0o600)
    done = cli(tmp_path, "backup", "--db", str(path), "--to", str(tmp_path / "b"), "--keep", "1")
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stdout and len(list((tmp_path / "b").iterdir())) == 1
    overwrite_pages(path, pages_of(pristine, ["messages"], "leaf")[:2], seed=9)
    refused = cli(tmp_path, "backup", "--db", str(path), "--to", str(tmp_path / "b"))
    assert refused.returncode == 1 and "hermes-store recover" in refused.stderr
    assert len(list((tmp_path / "b").iterdir())) == 1, "the good backup must stay"
    new = tmp_path / "recovered.db"
    done = cli(tmp_path, "recover", "--from", str(path), "--to", str(new))
    assert done.returncode == 0, done.stderr
    assert "could not read" in done.stdout and new.exists()
    again = cli(tmp_path, "recover", "--from", str(path), "--to", str(new))
    assert again.returncode == 1 and "already exists" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_the_command_line_says_it_in_one_line(pristine: Path, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    damaged_copy(pristine, path, ROW_TREES)
    done = cli(tmp_path, "show", "s1", "--db", str(path))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(path) in lines[0] and "hermes-store recover" in lines[0]


@pytest.mark.parametrize("damage", ["header", "pages"])
def test_check_on_a_damaged_file_names_the_next_step_not_itself(
    pristine: Path, tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "state.db"
    if damage == "header":  # too damaged to open at all
        path.write_bytes(pristine.read_bytes())
        with path.open("r+b") as handle:
            handle.seek(16)
            handle.write(os.urandom(84))
    else:
        damaged_copy(pristine, path, ("messages",))
    for args in (("check",), ("check", "--json"), ("check", "--repair")):
        done = cli(tmp_path, *args, "--db", str(path))
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "Traceback" not in said, said
        assert f"hermes-store recover --from {path}" in said, said
        assert "hermes-store check'" not in said and "'hermes-store check " not in said, said


def garble_schema_text(path: Path) -> None:
    """One byte of ``CREATE TABLE messages`` made a byte that is not UTF-8, in every copy."""
    data = path.read_bytes()
    assert b"CREATE TABLE messages (" in data
    path.write_bytes(data.replace(b"CREATE TABLE messages (", b"CREATE\xffTABLE messages ("))


def test_a_schema_text_that_is_not_utf8_is_named_damage(pristine: Path, tmp_path: Path) -> None:
    """SQLite's "malformed schema" message then quotes raw bytes, which the driver cannot decode."""
    path = tmp_path / "state.db"
    path.write_bytes(pristine.read_bytes())
    os.chmod(path, 0o600)
    garble_schema_text(path)
    before = path.read_bytes()
    for open_it in (lambda: SessionDB(path), lambda: Store(path, read_only=True)):
        with pytest.raises(StoreCorruptError) as raised:
            open_it()
        assert str(path) in str(raised.value) and "schema" in raised.value.detail
    commands = [("check", "--db"), ("sessions", "--db"), ("export", "--db")]
    commands += [("backup", "--to", str(tmp_path / "kept"), "--db")]
    commands += [("copy", "--to", str(tmp_path / "copy.db"), "--from")]
    for *command, option in commands:
        done = cli(tmp_path, *command, option, str(path))
        said = done.stdout + done.stderr  # check reports on stdout, other commands on stderr
        assert done.returncode == 1 and "Traceback" not in said, said
        assert "damaged" in said and "hermes-store recover" in said
    assert path.read_bytes() == before


_EXTENDED_CODE_CHILD = """
import json, sys
from hermes_store import SessionDB, StoreCorruptError
from hermes_store.backends.sqlite import library
path = sys.argv[1]
db = SessionDB(path)
db.create_session("s1", "cli")
db.append_messages("s1", [{"role": "user", "content": f"hello world {i}"} for i in range(50)])
raw = library.driver.connect(path)
raw.execute("UPDATE messages_fts_data SET block = x'0102030405060708'")
raw.commit()
try:
    raw.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'hello'").fetchall()
    code = None
except library.driver.DatabaseError as error:
    code = error.sqlite_errorcode
raw.close()
try:
    db.search_messages("hello")
    outcome = "answered"
except StoreCorruptError as error:
    outcome = "named: " + str(error)
except Exception as error:
    outcome = f"{type(error).__name__}: {error}"
print(json.dumps({"module": library.MODULE, "code": code, "outcome": outcome}))
"""


def test_an_extended_corruption_code_is_named_damage(tmp_path: Path) -> None:
    """FTS5's ``SQLITE_CORRUPT_VTAB`` (267, primary code 11) is damage as plain CORRUPT is.

    pysqlite3 reports primary codes only; the stdlib module reports extended
    ones, so the drill runs in a child on it (``HERMES_STORE_SQLITE=system``).
    """
    environment = {**os.environ, "PYTHONPATH": str(REPO), "HERMES_STORE_SQLITE": "system"}
    done = subprocess.run(
        [sys.executable, "-c", _EXTENDED_CODE_CHILD, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["module"] == "sqlite3"
    assert seen["code"] == 267, "the drill no longer produces SQLITE_CORRUPT_VTAB"
    assert seen["outcome"].startswith("named: "), seen["outcome"]


@pytest.mark.parametrize(
    "content",
    [b"S", b"x" * 50, bytes(50), bytes(4096), b"SQLite format 3\x00" + bytes(40)],
    ids=["1-byte", "50-junk", "50-zeros", "zeroed-page", "cut-header"],
)
def test_a_file_too_short_or_zeroed_is_named_never_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(content)
    for open_it in (lambda: SessionDB(path), lambda: Store(path, read_only=True)):
        with pytest.raises(StoreCorruptError) as raised:
            open_it()
        assert str(path) in str(raised.value)
    assert path.read_bytes() == content, "the damaged file was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


def test_an_empty_file_with_backups_of_it_is_not_made_a_new_store(tmp_path: Path) -> None:
    from hermes_store.tools.backup import backup

    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s1", "cli")
    made = backup(path, tmp_path / "backups", keep=1)
    path.write_bytes(b"")  # truncated to nothing: a full disk, a torn copy
    with pytest.raises(StoreCorruptError) as raised:
        SessionDB(path)
    assert "0 bytes" in str(raised.value) and "backup" in str(raised.value)
    said = str(raised.value)
    assert said.count(str(made.path)) == 1, said
    assert f"cp {made.path} {path}" in said and "delete the empty file" in said, said
    assert "recover" not in said, "nothing to salvage from 0 bytes"
    for command in (["check"], ["check", "--repair"], ["upgrade"]):
        done = cli(tmp_path, *command, "--db", str(path))
        told = done.stdout + done.stderr
        assert done.returncode == 1 and "Traceback" not in told, told
        assert f"cp {made.path} {path}" in told, told
        assert "makes a new store" not in told, "check sent the user to a refusing upgrade"
    assert path.stat().st_size == 0


def test_the_restore_line_for_an_empty_file_pastes_into_a_shell(tmp_path: Path) -> None:
    """A folder name with a space must not split the suggested ``cp`` into four words."""
    import shlex

    from hermes_store.tools.backup import backup

    folder = tmp_path / "my store"
    folder.mkdir()
    path = folder / "state.db"
    with SessionDB(path) as db:
        db.create_session("s1", "cli")
    made = backup(path, folder / "backups", keep=1)
    path.write_bytes(b"")
    with pytest.raises(StoreCorruptError) as raised:
        SessionDB(path)
    assert f"cp {shlex.quote(str(made.path))} {shlex.quote(str(path))}" in str(raised.value)


def test_an_empty_file_with_a_wal_beside_it_is_not_made_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    Path(f"{path}-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
    with pytest.raises(StoreCorruptError, match="state.db-wal"):
        SessionDB(path)
    assert path.stat().st_size == 0 and Path(f"{path}-wal").stat().st_size == 32


def test_an_empty_file_alone_becomes_a_new_store_and_check_calls_it_empty(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    for command in (["check"], ["check", "--repair"]):
        done = cli(tmp_path, *command, "--db", str(path))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "0 bytes, no store" in done.stderr, done.stderr
        assert path.stat().st_size == 0, "check made a store"
    with SessionDB(path) as db:  # touch state.db, then use it: a new store, as before
        db.create_session("s1", "cli")
        assert db.get_session("s1") is not None
