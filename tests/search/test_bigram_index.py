"""Revision 0009's CJK pair index: what it adds, how it is kept, and that search finds all.

Other programs write the file with plain ``sqlite3`` here (the triggers must
keep the index for them too); the reference for recall is always a ``LIKE``
scan of the same file.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.layout import BIGRAM_OBJECTS, BIGRAM_TABLE
from hermes_store.backends.sqlite.layout import detect
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.bigrams import RANGES, branch_grams, grams, indexed
from hermes_store.domain.query_syntax import query_items
from hermes_store.domain.substrings import has_cjk
from hermes_store.schema.migrate import downgrade, upgrade
from hermes_store.schema.state import SchemaState
from tests.support.revision_steps import schema_rows, step

pytestmark = pytest.mark.sqlite_only("the CJK pair index of revision 0009 (SQLite triggers)")

WORDS = ["问题", "配置", "服务", "数据", "鸡蛋", "회의", "서버", "会議", "データ", "확인"]
FILLER = "的了是在我有他这中大来上国个到说们为子和你地出道也时年"


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _index(path: Path) -> set[tuple[str, int]]:
    with _raw(path) as raw:
        return set(raw.execute(f"SELECT gram, message_id FROM {BIGRAM_TABLE}"))


def _expected(path: Path) -> set[tuple[str, int]]:
    """The pairs of every stored message, computed in Python from the text itself."""
    with _raw(path) as raw:
        rows = raw.execute("SELECT id, content FROM messages").fetchall()
    return {(gram, id_) for id_, text in rows if isinstance(text, str) for gram in grams(text)}


def _like_ids(path: Path, term: str) -> list[int]:
    with _raw(path) as raw:
        return [
            row[0]
            for row in raw.execute(
                "SELECT id FROM messages WHERE content LIKE ? ORDER BY id DESC", (f"%{term}%",)
            )
        ]


def _text(rng: random.Random, words: int) -> str:
    parts = []
    for _ in range(words):
        parts.append(rng.choice(WORDS) if rng.random() < 0.3 else rng.choice(FILLER) * 2)
        if rng.random() < 0.2:
            parts.append(rng.choice([" ", "，", "ok ", "\n"]))
    return "".join(parts)


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[tuple[Path, SessionDB]]:
    path = tmp_path / "state.db"
    rng = random.Random(19)
    db = SessionDB(path)
    for n in range(6):
        db.create_session(f"s{n}", "telegram" if n % 2 else "cli")
        db.append_messages(
            f"s{n}",
            [
                {
                    "role": rng.choice(["user", "assistant"]),
                    "content": _text(rng, rng.randint(1, 30)),
                }
                for _ in range(40)
            ]
            + [{"role": "tool", "content": "plain ascii only"}, {"role": "user", "content": None}],
        )
    yield path, db
    db.close()


def test_the_glob_class_is_the_ranges_and_the_search_routing_class() -> None:
    for low, high in RANGES:
        for code in (low, high):
            assert indexed(chr(code)) and has_cjk(chr(code))
        assert not indexed(chr(low - 1)) or any(lo <= low - 1 <= hi for lo, hi in RANGES)
    assert not indexed("a") and not indexed("，")
    assert grams("问题a问题，服务端") == ["问题", "服务", "务端"]


def test_branch_grams_bound_every_branch_or_give_up() -> None:
    assert branch_grams(query_items("问题")) == [["问题"]]
    assert branch_grams(query_items("nginx 配置")) == [["配置"]]
    assert branch_grams(query_items("问题 OR 서버")) == [["问题"], ["서버"]]
    assert branch_grams(query_items("问题 -鸡蛋")) == [["问题"]]  # excluded terms bound nothing
    assert branch_grams(query_items("问题 OR 问")) is None  # one character: no pair
    assert branch_grams(query_items("docker")) is None


def test_0009_adds_only_the_pair_index_keeps_schema_version_and_downgrade_removes_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store, at_eight, at_nine = step(path, "0008", "0009")
    with _raw(path) as raw:
        assert raw.execute(
            "SELECT COUNT(*), MIN(n), MAX(n) FROM messages_cjk_positions"
        ).fetchone() == (1024, 0, 1023)
    assert at_eight <= at_nine
    assert {(kind, name) for kind, name, _sql in at_nine - at_eight} == BIGRAM_OBJECTS
    downgrade(store.engine, "0008")
    assert schema_rows(path) == at_eight
    with _raw(path) as raw:
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
    store.close()


def test_the_upgrade_back_fills_existing_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, "0008")
    rng = random.Random(7)
    with _raw(path) as raw:  # rows written before the index existed
        raw.execute("INSERT INTO sessions (id, source, started_at) VALUES ('old', 'cli', 1.0)")
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('old', 'user', ?, ?)",
            [(_text(rng, rng.randint(1, 40)), float(n)) for n in range(300)],
        )
    upgrade(store.engine, "0009")
    store.close()
    assert _index(path) == _expected(path) != set()


def test_triggers_keep_the_index_for_another_program_on_insert_update_delete(
    filled: tuple[Path, SessionDB],
) -> None:
    path, _db = filled
    assert _index(path) == _expected(path) != set()
    rng = random.Random(3)
    with _raw(path) as raw:
        ids = [row[0] for row in raw.execute("SELECT id FROM messages ORDER BY id")]
        raw.executemany(
            "UPDATE messages SET content = ? WHERE id = ?",
            [(_text(rng, 12), id_) for id_ in rng.sample(ids, 30)],
        )
        raw.execute("UPDATE messages SET content = 'now plain ascii' WHERE id = ?", (ids[0],))
        raw.execute("UPDATE messages SET content = NULL WHERE id = ?", (ids[1],))
        raw.execute("UPDATE messages SET role = 'assistant' WHERE id = ?", (ids[2],))
        raw.execute("UPDATE messages SET id = 100000 WHERE id = ?", (ids[3],))
        raw.execute("DELETE FROM messages WHERE id IN (?, ?, ?)", tuple(ids[4:7]))
        raw.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s0', 'user', ?, 9e9)",
            ("问题" * 3,),
        )
    assert _index(path) == _expected(path)


def test_long_texts_keep_the_pairs_across_every_cut(tmp_path: Path) -> None:
    """Pieces of 1,025 and 33 characters overlap by one: no pair straddling a cut is lost."""
    path = tmp_path / "state.db"
    chars = [chr(0x4E00 + n) for n in range(3000)]  # 2,999 distinct pairs, one per position
    with SessionDB(path) as db:
        db.create_session("long", "cli")
        db.append_message("long", "tool", "".join(chars))
        db.append_message("long", "tool", "x" * 1023 + "问题" + "y" * 40 + "配" + "置")
    held = _index(path)
    assert held == _expected(path)
    assert len([pair for pair in held if pair[1] == 1]) == 2999
    assert {("问题", 2), ("配置", 2)} <= held


@pytest.mark.parametrize("term", ["问题", "配置", "회의", "서버", "会議", "鸡蛋", "数据", "无此"])
def test_search_recall_equals_a_like_scan_also_after_other_programs_write(
    filled: tuple[Path, SessionDB], term: str
) -> None:
    path, db = filled

    def found() -> list[int]:
        return [hit["id"] for hit in db.search_messages(term, limit=10_000)]

    assert found() == _like_ids(path, term)
    rng = random.Random(term)
    with _raw(path) as raw:
        ids = [row[0] for row in raw.execute("SELECT id FROM messages")]
        raw.executemany(
            "UPDATE messages SET content = ? WHERE id = ?",
            [(_text(rng, 10), id_) for id_ in rng.sample(ids, 25)],
        )
        raw.executemany(
            "DELETE FROM messages WHERE id = ?", [(id_,) for id_ in rng.sample(ids, 15)]
        )
        raw.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s1', 'user', ?, 1e10)",
            (f"末尾{term}",),
        )
    assert found() == _like_ids(path, term)


def test_filters_and_mixed_latin_terms_use_the_index_with_like_deciding(
    filled: tuple[Path, SessionDB],
) -> None:
    path, db = filled
    with _raw(path) as raw:
        raw.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s1', 'user', 'nginx 的配置', 1e10)"
        )
        expected = [
            row[0]
            for row in raw.execute(
                "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE m.content LIKE '%nginx%' AND m.content LIKE '%配置%' "
                "AND s.source = 'telegram' AND m.role = 'user' ORDER BY m.id DESC"
            )
        ]
        either = [
            row[0]
            for row in raw.execute(
                "SELECT id FROM messages WHERE content LIKE '%问题%' OR content LIKE '%회의%' "
                "ORDER BY id DESC"
            )
        ]
    hits = db.search_messages("nginx 配置", source_filter=["telegram"], role_filter=["user"])
    assert [h["id"] for h in hits] == expected != []
    assert [h["id"] for h in db.search_messages("问题 OR 회의", limit=10_000)] == either


def test_the_layout_reads_the_index_only_with_all_its_triggers(tmp_path: Path) -> None:
    """Detection (files not at our head) wants every object: a lost trigger means stale pairs."""
    path = tmp_path / "state.db"
    SessionDB(path).close()
    with _raw(path) as raw:
        state = SchemaState(6, "0008")
        assert detect(raw, state).bigrams is True
        raw.execute("DROP TRIGGER messages_cjk_bigrams_update")
        assert detect(raw, state).bigrams is False


def test_a_file_without_the_index_scans_with_like(tmp_path: Path) -> None:
    """An older file opened read-only is not upgraded: its short CJK terms scan, as before."""
    path = tmp_path / "state.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, "0008")
    store.close()
    with _raw(path) as raw:
        raw.execute("INSERT INTO sessions (id, source, started_at) VALUES ('old', 'cli', 1.0)")
        raw.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('old', 'user', ?, ?)",
            [("旧的问题", 1.0), ("没有", 2.0), ("问题在这里", 3.0)],
        )
    with SessionDB(path, read_only=True) as db:
        assert (
            [hit["id"] for hit in db.search_messages("问题")] == _like_ids(path, "问题") == [3, 1]
        )
    with _raw(path) as raw:
        assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [("0008",)]


def test_recovery_rebuilds_the_pair_index_after_its_bulk_load(
    filled: tuple[Path, SessionDB], tmp_path: Path
) -> None:
    """Recovery loads messages with the insert triggers off; the pairs must come back too."""
    from hermes_store.tools.recovery.recover import recover

    path, db = filled
    db.close()
    target = tmp_path / "recovered.db"
    recover(path, target)
    assert _index(target) == _expected(target) != set()


def _cut_points() -> list[int]:
    """Every offset where one of revision 0012's levels cuts, up to just past 1 Mi."""
    points = {1_048_576}
    for size in (32, 1024, 32_768):
        points.update(range(size, 1_048_576 + 2 * size, size))
    return sorted(points)


def test_pairs_straddling_every_level_of_the_cut_are_kept(tmp_path: Path) -> None:
    """Revision 0012 cuts 1 Mi, 32 Ki, 1 Ki and 33 characters deep; each cut overlaps by one.

    A pair sits across each cut point of every level in a text of just over
    1 Mi characters (Latin filler between, so the pieces without a pair are
    skipped, as they are meant to be); then a dense CJK text past 32 Ki.
    Update and delete must take away exactly what the insert wrote.
    """
    path = tmp_path / "state.db"
    chars = ["x"] * (1_048_576 + 3 * 32_768)
    for number, point in enumerate(_cut_points()):
        chars[point - 1] = chr(0x4E00 + number % 20_000)
        chars[point] = chr(0x9000 - number % 3_000)
    sparse = "".join(chars)
    dense = "".join(chr(0x4E00 + (n * 7) % 20_000) for n in range(40_000))
    with SessionDB(path) as db:
        db.create_session("long", "cli")
        sparse_id = db.append_message("long", "tool", sparse)
        dense_id = db.append_message("long", "tool", dense)
    held = _index(path)
    assert held == _expected(path)
    assert len([pair for pair in held if pair[1] == sparse_id]) == len(set(grams(sparse)))
    assert len([pair for pair in held if pair[1] == dense_id]) == len(set(grams(dense))) == 20_000
    with _raw(path) as raw:
        raw.execute("UPDATE messages SET content = ? WHERE id = ?", (dense[:5000], sparse_id))
        assert _index(path) == _expected(path)
        raw.execute("DELETE FROM messages WHERE id = ?", (dense_id,))
    assert _index(path) == _expected(path)
    assert {message_id for _gram, message_id in _index(path)} == {sparse_id}


def test_0012_replaces_only_the_pair_triggers_and_downgrade_restores_0009s(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store, at_eleven, at_twelve = step(path, "0011", "0012")
    changed = {(kind, name) for kind, name, _sql in at_eleven ^ at_twelve}
    assert changed == {(kind, name) for kind, name in BIGRAM_OBJECTS if kind == "trigger"}
    downgrade(store.engine, "0011")
    assert schema_rows(path) == at_eleven
    store.close()


def test_0012_leaves_a_lost_pair_trigger_lost(tmp_path: Path) -> None:
    """A file missing one trigger has stale pairs; re-adding it would make them look kept."""
    path = tmp_path / "state.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, "0011")
    with _raw(path) as raw:
        raw.execute("DROP TRIGGER messages_cjk_bigrams_update")
    upgrade(store.engine, "0012")
    with _raw(path) as raw:
        triggers = {
            name
            for (name,) in raw.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%bigrams%'"
            )
        }
        assert triggers == {"messages_cjk_bigrams_insert", "messages_cjk_bigrams_delete"}
        assert detect(raw, SchemaState(6, "0011")).bigrams is False
    store.close()
