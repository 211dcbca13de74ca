"""``recover`` on real damaged files: exact salvage, nothing invented, and ``.recover`` as anchor.

One 20,000-message file is built per module by bulk SQL (bench/micro/corpus.py) and
copied for each drill; the drills (bench/ops/damage.py, the same ones
``python -m bench.ops.recover`` reports) overwrite whole pages with random bytes,
never page 1. For every drill the test knows, from the intact file, which
message ids sat on the damaged pages, so it asserts the salvage exactly:
every other message comes back byte for byte, no row is invented, and the
source files are not written. Where a ``sqlite3`` shell whose ``.recover``
works is found (``$HERMES_SQLITE3_SHELL`` or PATH; Debian's is built without
``sqlite_dbpage`` and cannot), ours must get back at least what it does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.micro.corpus import CorpusSpec, build_corpus, make_template
from bench.ops.damage import (
    DRILLS,
    Drill,
    dbstat_rows,
    overwrite_pages,
    page_size,
    pages_of,
    recover_shell,
    shell_recover,
)
from hermes_store import SessionDB, Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.check import check
from hermes_store.tools.recovery.pages import TABLE_LEAF, PageFile, Unreadable, varint
from hermes_store.tools.recovery.recover import RecoveryError, recover
from hermes_store.tools.recovery.salvage import salvage
from tests.support.upstream_schema import build_upstream_db

pytestmark = pytest.mark.sqlite_only("salvage of damaged SQLite files")

MESSAGES = 20_000
COLUMNS = (
    "id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
    "token_count, finish_reason, reasoning, reasoning_details, codex_reasoning_items"
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("corpus")
    template = make_template(work / "template.db")
    path = work / "corpus.db"
    build_corpus(template, path, CorpusSpec(total_messages=MESSAGES, long_session_messages=2000))
    return path


@pytest.fixture(scope="module")
def original(pristine: Path) -> dict[int, tuple[Any, ...]]:
    connection = sqlite3.connect(pristine)
    try:
        return {row[0]: row for row in connection.execute(f"SELECT {COLUMNS} FROM messages")}
    finally:
        connection.close()


def rowids_on(path: Path, pages: list[int]) -> set[int]:
    """The message ids stored on these pages of the intact file (leaves of messages)."""
    connection = sqlite3.connect(path)
    (root,) = connection.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'messages'"
    ).fetchone()
    owned = {
        row[0] for row in dbstat_rows(path, "SELECT pageno FROM dbstat WHERE name = 'messages'")
    }
    connection.close()
    ids: set[int] = set()
    with PageFile(path) as file:
        for number in pages:
            page = file.btree(number)
            if number in owned and page is not None and page.kind == TABLE_LEAF:
                ids.update(cell.rowid for cell in file.cells(page))  # type: ignore[union-attr]
    assert root not in pages
    return ids


def digest(path: Path) -> dict[str, str | None]:
    return {
        suffix: hashlib.sha256(Path(f"{path}{suffix}").read_bytes()).hexdigest()
        if Path(f"{path}{suffix}").exists()
        else None
        for suffix in ("", "-wal", "-shm")
    }


def recovered_rows(path: Path) -> dict[int, tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return {row[0]: row for row in connection.execute(f"SELECT {COLUMNS} FROM messages")}
    finally:
        connection.close()


def assert_healthy_store(path: Path, term: str = "docker") -> None:
    """Head schema, page check, both FTS indexes and the counters: a store like any other."""
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    store = Store(path)
    report = check(store)
    assert report.ok, report
    store.close()
    db = SessionDB(path)
    assert db.search_messages(term), "the recovered file is not searchable"
    db.close()


@pytest.mark.parametrize("drill", DRILLS, ids=lambda drill: drill.name)
def test_drill_salvages_every_readable_message_exactly(
    drill: Drill, pristine: Path, original: dict[int, tuple[Any, ...]], tmp_path: Path
) -> None:
    damaged = tmp_path / "state.db"
    shutil.copyfile(pristine, damaged)
    pages = overwrite_pages(damaged, drill.pages(pristine), seed=drill.seed)
    lost = rowids_on(pristine, pages)
    before = digest(damaged)

    report = recover(damaged, tmp_path / "recovered.db")

    assert digest(damaged) == before, "recover wrote to the damaged file"
    rows = recovered_rows(tmp_path / "recovered.db")
    assert set(rows) == set(original) - lost
    assert all(rows[key] == original[key] for key in rows), "a salvaged row differs"
    assert report.messages_recovered == len(rows)
    assert report.messages_claimed + report.sessions_claimed > 0
    unread = {n for first, last in report.unread_ranges for n in range(first, last + 1)}
    assert lost <= unread, "the report does not name every id it could not read"
    assert not unread & set(rows)
    assert_healthy_store(tmp_path / "recovered.db")

    shell, why = recover_shell()
    if shell is None:
        pytest.skip(f"comparison with .recover: {why}")
    theirs = shell_recover(shell, damaged, tmp_path)
    assert theirs["messages"] <= set(rows) | theirs["lost_and_found_messages"]
    assert len(rows) >= len(theirs["messages"] | theirs["lost_and_found_messages"])


def test_lost_session_rows_come_back_as_stand_ins(pristine: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "state.db"
    shutil.copyfile(pristine, damaged)
    drill = next(d for d in DRILLS if d.among == ("sessions",))
    overwrite_pages(damaged, drill.pages(pristine), seed=drill.seed)
    report = recover(damaged, tmp_path / "recovered.db")
    assert report.sessions_rebuilt, "the drill should have cost some session rows"
    assert report.messages_recovered == MESSAGES
    db = SessionDB(tmp_path / "recovered.db")
    stand_in = db.get_session(report.sessions_rebuilt[0])
    assert stand_in is not None and stand_in["source"] == "unknown"
    assert stand_in["message_count"] == len(db.get_messages(stand_in["id"])) > 0
    assert report.sessions_recovered == report.sessions_claimed
    db.close()


@pytest.mark.parametrize("drill", DRILLS[1:2], ids=lambda drill: drill.name)
def test_a_live_wal_is_salvaged_from_a_copy(drill: Drill, pristine: Path, tmp_path: Path) -> None:
    """A file taken while the agent ran: recent commits are only in its ``-wal``."""
    live = tmp_path / "live" / "state.db"
    live.parent.mkdir()
    shutil.copyfile(pristine, live)
    os.chmod(live, 0o600)
    db = SessionDB(live, durability="normal")
    db.create_session("after", "cli")
    ids = db.append_messages("after", [{"role": "user", "content": f"late {i}"} for i in range(30)])
    frozen = tmp_path / "state.db"
    for suffix in ("", "-wal", "-shm"):  # what a crash leaves on disk, agent still running
        shutil.copyfile(f"{live}{suffix}", f"{frozen}{suffix}")
    db.close()
    assert Path(f"{frozen}-wal").stat().st_size > 0
    overwrite_pages(frozen, drill.pages(pristine), seed=drill.seed)
    before = digest(frozen)
    report = recover(frozen, tmp_path / "recovered.db")
    assert digest(frozen) == before, "recover wrote to the damaged file or its sidecars"
    assert report.wal_applied is True
    rows = recovered_rows(tmp_path / "recovered.db")
    assert set(ids) <= set(rows)
    assert [rows[i][3] for i in ids] == [f"late {i}" for i in range(30)]


def test_ids_are_never_handed_out_again(pristine: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "state.db"
    shutil.copyfile(pristine, damaged)
    connection = sqlite3.connect(pristine)
    (last,) = connection.execute("SELECT MAX(id) FROM messages").fetchone()
    connection.close()
    ((page,),) = dbstat_rows(
        pristine,
        "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' "
        "ORDER BY path DESC LIMIT 1",
    )
    overwrite_pages(damaged, [int(str(page))], seed=1)  # the last leaf: the largest ids are gone
    recover(damaged, tmp_path / "recovered.db")
    db = SessionDB(tmp_path / "recovered.db")
    assert db.append_message("sess_long", "user", "new") == last + 1
    db.close()


def test_recover_refuses_what_it_must_not_do(pristine: Path, tmp_path: Path) -> None:
    source = tmp_path / "state.db"
    shutil.copyfile(pristine, source)
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"keep me")
    with pytest.raises(RecoveryError, match="already exists"):
        recover(source, taken)
    assert taken.read_bytes() == b"keep me"
    with pytest.raises(RecoveryError, match="no database file"):
        recover(tmp_path / "missing.db", tmp_path / "new.db")
    with pytest.raises(RecoveryError, match="SQLite file"):
        recover("postgresql+psycopg://u@localhost/db", tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ----------------------------------------------------------------------
# hostile files: crafted on small stores built here (issue #27)
# ----------------------------------------------------------------------
def small_store(path: Path, sessions: dict[str, list[str]]) -> None:
    """A store holding ``sessions`` (id -> message contents), checkpointed into the main file."""
    db = SessionDB(path, durability="normal")
    for session_id, contents in sessions.items():
        db.create_session(session_id, "cli", model="m")
        db.append_messages(
            session_id,
            [
                {"role": "user", "content": content, "tool_calls": [{"id": str(n)}]}
                for n, content in enumerate(contents)
            ],
        )
    db.close()
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def messages_tree_sql(path: Path) -> str:
    """The ``CREATE TABLE messages`` text the file holds (read even when it no longer parses)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA writable_schema = ON")
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'messages'"
        ).fetchone()
    finally:
        connection.close()
    return str(sql)


def test_a_damaged_column_name_in_the_schema_text_costs_no_message(tmp_path: Path) -> None:
    """One byte of ``CREATE TABLE messages`` (``timestamp`` -> ``timestamq``), pages intact.

    The record fields are read in our known column order, not by the names
    the damaged text gives: every message comes back exactly.
    """
    path = tmp_path / "state.db"
    small_store(path, {f"s{i}": [f"message {i} {j}" for j in range(50)] for i in range(3)})
    original = recovered_rows(path)
    sql = messages_tree_sql(path).encode()
    data = bytearray(path.read_bytes())
    copies = [at for at in range(len(data)) if data.startswith(sql, at)]
    assert copies, "the CREATE TABLE text is not stored whole on one page"
    for at in copies:
        name = data.index(b"timestamp REAL", at)
        data[name + 8] = ord("q")
    path.write_bytes(bytes(data))
    assert "timestamq REAL" in messages_tree_sql(path), "the live schema text was not damaged"

    report = recover(path, tmp_path / "recovered.db")

    assert recovered_rows(tmp_path / "recovered.db") == original
    assert report.messages_recovered == 150 and report.unread_ranges == []
    assert any("timestamq -> timestamp" in note for note in report.notes), report.notes
    assert_healthy_store(tmp_path / "recovered.db", "message")


def test_a_garbled_column_list_still_reads_every_row_of_ours(tmp_path: Path) -> None:
    """A required name of ours lost beyond recognition, the column list one longer
    (``role TEXT NOT NULL,`` -> ``zzzz TEXT, a TEXT,``): the rows are read in our own
    column order, and nothing fails as a whole."""
    path = tmp_path / "state.db"
    small_store(path, {"s": [f"message {j}" for j in range(40)]})
    original = recovered_rows(path)
    sql = messages_tree_sql(path).encode()
    data = bytearray(path.read_bytes())
    was, now = b"role TEXT NOT NULL,", b"zzzz TEXT, a TEXT, "
    assert len(was) == len(now)
    for at in [at for at in range(len(data)) if data.startswith(sql, at)]:
        role = data.index(was, at)
        data[role : role + len(was)] = now
    path.write_bytes(bytes(data))
    assert "zzzz TEXT, a TEXT," in messages_tree_sql(path)

    report = recover(path, tmp_path / "recovered.db")

    assert recovered_rows(tmp_path / "recovered.db") == original
    assert report.messages_recovered == 40


def craft_one_chain(path: Path) -> int:
    """Link every overflow page of ``messages`` into one chain and aim every cell at its head.

    Each overflowing cell's size is also raised by whole overflow pages (its
    varint keeps its length and its local part its size) until it claims
    about the whole chain: read naively, every cell walks the whole chain.
    Returns the chain's length.
    """
    chain = pages_of(path, ["messages"], "overflow")
    size = page_size(path)
    data = bytearray(path.read_bytes())
    for number, following in zip(chain, [*chain[1:], 0], strict=True):
        start = (number - 1) * size
        data[start : start + 4] = following.to_bytes(4, "big")
    room = size - 4  # no reserved bytes in the store's files
    with PageFile(path) as file:
        for number in pages_of(path, ["messages"], "leaf"):
            page = file.btree(number)
            assert page is not None
            for offset in page.cell_offsets:
                at = (number - 1) * size + offset
                length, after = varint(bytes(data), at)
                _rowid, after_key = varint(bytes(data), after)
                local = file._local_size(length, table=True)
                if local == length:
                    continue
                width = after - at
                most = (1 << (7 * width)) - 1
                claimed = length + min(len(chain), (most - length) // room) * room
                for index in range(width):  # the same width, in SQLite's varint form
                    shift = 7 * (width - 1 - index)
                    more = 0x80 if index < width - 1 else 0
                    data[at + index] = (claimed >> shift) & 0x7F | more
                assert varint(bytes(data), at) == (claimed, after)
                pointer = (number - 1) * size + after_key + local
                data[pointer : pointer + 4] = chain[0].to_bytes(4, "big")
    path.write_bytes(bytes(data))
    return len(chain)


def test_crafted_overflow_chains_are_read_once(tmp_path: Path) -> None:
    """All overflow pages in one chain, every long message aimed at its head.

    The salvage reads each overflow page once at most: the pages it reads
    (its own step counter) stay within a few times the file's pages, where a
    naive reader walks the chain once per cell. The short messages, whose
    cells hold no pointer, all come back.
    """
    path = tmp_path / "state.db"
    short = [f"short {j}" for j in range(30)]
    long = [f"long {j} " + "x" * 17_000 for j in range(60)]  # a 3-byte size varint
    small_store(path, {"s": short + long})
    chain = craft_one_chain(path)
    pages = path.stat().st_size // page_size(path)
    assert chain >= 200, "the corpus should need a long chain"

    found = salvage(path)

    assert found.pages_read <= 4 * pages, f"{found.pages_read} page reads for {pages} pages"
    report = recover(path, tmp_path / "recovered.db")
    contents = {row[3] for row in recovered_rows(tmp_path / "recovered.db").values()}
    assert set(short) <= contents
    assert report.messages_recovered == len(contents) < len(short) + len(long)


_PAUSED_RECOVER = """
import sys, time
from hermes_store.tools.recovery import recover as module

def paused(*_args, **_kwargs):  # the new file is built, not yet checked nor renamed
    print("paused", flush=True)
    time.sleep(600)

module._verify = paused
if sys.argv[3] == "cli":
    from hermes_store.cli import main
    main(["recover", "--from", sys.argv[1], "--to", sys.argv[2]])
else:
    module.recover(sys.argv[1], sys.argv[2])
"""


def paused_recover(source: Path, target: Path, via: str = "api") -> subprocess.Popen[str]:
    """A ``recover`` in another process, stopped once its scratch copy and new file exist.

    ``via="cli"`` runs it as ``hermes-store recover`` does (through the CLI's
    ``main``, with its signal handling).
    """
    child = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_RECOVER, str(source), str(target), via],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "paused"
    return child


def test_a_killed_recover_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    """SIGKILL cannot be cleaned up after; the next run removes what it left, and only that.

    A run still alive keeps its scratch folder (it holds its lock); once it is
    killed, the next ``recover`` into the same folder removes the full copy of
    the source and the half-built file it left.
    """
    source = tmp_path / "damaged" / "state.db"
    source.parent.mkdir()
    small_store(source, {"s": [f"message {j}" for j in range(40)]})
    out = tmp_path / "out"
    out.mkdir()

    alive = paused_recover(source, out / "first.db")
    try:
        left = [p for p in out.iterdir() if p.name.startswith(".hermes-recover-")]
        assert len(left) == 1 and any(left[0].rglob("state.db")), "no copy of the source"
        recover(source, out / "second.db")  # beside a live run: its folder stays
        assert left[0].exists(), "a live run's scratch folder was removed"
    finally:
        alive.kill()
        alive.wait()
    assert left[0].exists(), "SIGKILL left nothing: the test did not kill a run mid-way"

    recover(source, out / "third.db")

    assert sorted(p.name for p in out.iterdir()) == ["second.db", "third.db"]


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_terminated_recover_cleans_up_after_itself(tmp_path: Path, signal_name: str) -> None:
    """``kill`` (or a closed terminal) is not SIGKILL: the run removes its scratch
    folder -- a full copy of the source -- and its half-built file before it exits."""
    source = tmp_path / "damaged" / "state.db"
    source.parent.mkdir()
    small_store(source, {"s": [f"message {j}" for j in range(40)]})
    out = tmp_path / "out"
    out.mkdir()
    child = paused_recover(source, out / "new.db", via="cli")
    left = [p for p in out.iterdir() if p.name.startswith(".hermes-recover-")]
    assert len(left) == 1 and any(left[0].rglob("state.db")), "no copy of the source"

    child.send_signal(getattr(signal, signal_name))
    _, said = child.communicate(timeout=60)

    assert child.returncode == 128 + getattr(signal, signal_name), said
    assert "Traceback" not in said and "stopped by" in said, said
    assert list(out.iterdir()) == [], "the run left files behind"


def message_rows_on(path: Path, numbers: set[int]) -> dict[int, list[Any]]:
    """Message id -> values of the rows stored on these pages, read as table leaves."""
    rows: dict[int, list[Any]] = {}
    with PageFile(path) as file:
        for number in numbers:
            page = file.btree(number)
            if page is None or page.kind != TABLE_LEAF:
                continue
            for cell in file.cells(page):
                if isinstance(cell, Unreadable) or cell.rowid is None or cell.payload is None:
                    continue
                values = file.decode(cell.payload)
                if values is not None and len(values) == 13:
                    rows[cell.rowid] = values
    return rows


def test_deleted_rows_on_the_freelist_do_not_come_back(tmp_path: Path) -> None:
    """A deleted session's messages still sit on freed pages; recover must not revive them."""
    path = tmp_path / "state.db"
    text = "deleted words " * 40
    small_store(path, {"gone": [text] * 200, "kept": [f"kept {j}" for j in range(50)]})
    db = SessionDB(path, durability="normal")
    assert db.delete_session("gone")
    db.close()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    kept = recovered_rows(path)
    with PageFile(path) as file:
        freed, whole = file.freelist()
    assert whole
    stale = message_rows_on(path, freed)
    assert any(values[1] == "gone" for values in stale.values()), "no deleted row left to revive"

    report = recover(path, tmp_path / "recovered.db")

    assert recovered_rows(tmp_path / "recovered.db") == kept
    assert report.messages_recovered == 50 and report.orphan_rows == 0


def test_a_stale_copy_of_a_page_is_counted_and_never_read_over_the_tree(tmp_path: Path) -> None:
    """A page no tree reaches holding copies of rows the tree has (a page the tree moved
    away from, its freelist entry lost): the tree's rows are kept, each copy is counted."""
    path = tmp_path / "state.db"
    small_store(path, {"s": [f"message {j}" for j in range(60)]})
    original = recovered_rows(path)
    leaf = pages_of(path, ["messages"], "leaf")[0]
    size = page_size(path)
    data = bytearray(path.read_bytes())
    copies = message_rows_on(path, {leaf})
    stale = bytes(data[(leaf - 1) * size : leaf * size])
    assert stale.count(b"message ") == len(copies) > 0
    copy = stale.replace(b"message ", b"MESSAGE ")  # the stale copies say something else
    count = int.from_bytes(data[28:32], "big")
    data[28:32] = (count + 1).to_bytes(4, "big")  # the file now ends with that page
    path.write_bytes(bytes(data + copy))

    report = recover(path, tmp_path / "recovered.db")

    assert recovered_rows(tmp_path / "recovered.db") == original
    assert report.conflicting_rows == len(copies)
    assert f"{len(copies)} stale copies of rows were skipped" in " ".join(report.notes)


def test_an_agent_file_with_a_damaged_column_name_loses_nothing(tmp_path: Path) -> None:
    """The agent's v25 puts a column of its own (``effect_disposition``) where the damaged
    name sits: the lost name is told from the stranger by its likeness to ``timestamp``."""
    (tmp_path / "whole").mkdir()
    whole = build_upstream_db(tmp_path / "whole" / "state.db", 25)
    damaged = tmp_path / "damaged" / "state.db"
    damaged.parent.mkdir()
    connection = sqlite3.connect(whole)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    shutil.copyfile(whole, damaged)
    sql = messages_tree_sql(damaged).encode()
    assert b"effect_disposition TEXT" in sql
    data = bytearray(damaged.read_bytes())
    copies = [at for at in range(len(data)) if data.startswith(sql, at)]
    assert copies
    for at in copies:
        name = data.index(b"timestamp REAL", at)
        data[name + 8] = ord("q")
    damaged.write_bytes(bytes(data))

    expected = recover(whole, tmp_path / "from-whole.db")
    report = recover(damaged, tmp_path / "from-damaged.db")

    assert expected.messages_recovered > 0
    rows = recovered_rows(tmp_path / "from-damaged.db")
    assert rows == recovered_rows(tmp_path / "from-whole.db")
    assert report.messages_recovered == expected.messages_recovered


def test_a_message_whose_text_is_not_utf8_is_kept(tmp_path: Path) -> None:
    from tests.store.test_facade import READ_AS, plant_bad_text

    source = tmp_path / "state.db"
    message_id = plant_bad_text(source)
    target = tmp_path / "recovered.db"
    recover(source, target)
    with SessionDB(target) as db:
        kept = {m["id"]: m["content"] for m in db.get_messages("bad")}
        assert kept[message_id] == READ_AS
        assert len(kept) == 2


@pytest.mark.parametrize("agent_file", [False, True], ids=["ours", "agent-v25"])
def test_archived_and_pinned_are_recovered(tmp_path: Path, agent_file: bool) -> None:
    """Before, the flags were left out ("columns the head schema does not have") although
    the head schema has them (revision 0016): recovered sessions came back listed, unpinned."""
    source = tmp_path / "state.db"
    if agent_file:
        build_upstream_db(source, 25)
        with sqlite3.connect(source) as raw:
            raw.execute("UPDATE sessions SET archived = 1 WHERE id = 'up_root'")
            raw.execute("UPDATE sessions SET pinned = 1 WHERE id = 'up_other'")
        archived, pinned = "up_root", "up_other"
    else:
        small_store(source, {"a": ["one"], "b": ["two"], "c": ["three"]})
        with SessionDB(source) as db:
            db.set_session_archived("a", True)
            db.set_session_pinned("b", True)
        archived, pinned = "a", "b"
    report = recover(source, tmp_path / "new.db")
    assert not any("archived" in note for note in report.notes), report.notes
    with SessionDB(tmp_path / "new.db") as db:
        flags = {row["id"]: (row["archived"], row["pinned"]) for row in db.export_all()}
    assert flags[archived] == (1, 0) and flags[pinned] == (0, 1)
    assert sum(a + p for a, p in flags.values()) == 2
