"""The cheaper routes search takes at field size give what plain SQL gives on the same file.

Each expectation is computed with plain ``sqlite3`` on the file the store
wrote: FTS5's own ``ORDER BY rank`` for ranked routes, ``ORDER BY rowid
DESC`` for newest-first ones, ``LIKE`` for substring recall.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite import search as sqlite_search
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn
from hermes_store.repositories import search
from tests.support.search_rows import GATEWAY_FILTERS, first_column, gateway_order, hit_ids

pytestmark = pytest.mark.sqlite_only("FTS5 routes: bm25 windows, trigram order, prefix terms")

FILLER = ["lorem", "ipsum", "dolor", "amet", "sed", "elit"]


@pytest.fixture
def ties(tmp_path: Path) -> Iterator[tuple[Path, SessionDB]]:
    """Many messages with the same text: bm25 ties, which FTS5 orders by rowid."""
    path = tmp_path / "state.db"
    rng = random.Random(1903)
    db = SessionDB(path)
    for n in range(3):
        db.create_session(f"s{n}", ["cli", "telegram", "discord"][n])
        rows = []
        for _ in range(60):
            text = rng.choice(["kestrel", "kestrel kestrel lorem", "lorem kestrel ipsum dolor"])
            rows.append({"role": rng.choice(["user", "assistant", "tool"]), "content": text})
        db.append_messages(f"s{n}", rows)
    yield path, db
    db.close()


def test_a_filtered_search_scores_only_its_rows_in_fts5s_own_order_ties_included(
    ties: tuple[Path, SessionDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, db = ties
    monkeypatch.setattr(search, "RANK_WINDOW", 10_000)  # one window: exact bm25 order
    expected = gateway_order(path, "kestrel")
    hits = db.search_messages("kestrel", **GATEWAY_FILTERS, limit=1000)
    assert len(expected) > 20 and hit_ids(hits) == expected
    unfiltered = hit_ids(db.search_messages("kestrel", limit=1000))
    assert [id_ for id_ in unfiltered if id_ in set(expected)] == expected
    paged = db.search_messages(
        "kestrel", source_filter=["telegram", "discord"], role_filter=["user"], limit=7, offset=5
    )
    assert hit_ids(paged) == expected[5:12]


MIXED = [
    ("user", "docker 服务端 需要重启"),
    ("assistant", "重启了服务端，dockerd 也在运行"),
    ("user", "服务端 没有 docker"),
    ("assistant", "only docker here"),
    ("user", "服务端 only"),
    ("tool", "DOCKER 服务端日志"),
    ("user", "修改docker服务端的配置"),
]


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[tuple[Path, SessionDB]]:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    for n in range(4):
        db.create_session(f"m{n}", ["cli", "telegram"][n % 2])
        db.append_messages(f"m{n}", [{"role": r, "content": c} for r, c in MIXED])
    yield path, db
    db.close()


def test_latin_with_cjk_on_the_trigram_index_comes_newest_first_with_like_recall(
    mixed: tuple[Path, SessionDB],
) -> None:
    path, db = mixed
    like = first_column(
        path,
        "SELECT id FROM messages WHERE content LIKE '%docker%' AND content LIKE '%服务端%' "
        "ORDER BY id DESC",
    )
    assert len(like) == 20
    assert hit_ids(db.search_messages("docker 服务端", limit=50)) == like
    assert hit_ids(db.search_messages("docker 服务端", limit=5, offset=3)) == like[3:8]
    users = first_column(
        path,
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE content LIKE '%docker%' AND content LIKE '%服务端%' AND m.role = 'user' "
        "AND s.source = 'telegram' ORDER BY m.id DESC",
    )
    hits = db.search_messages(
        "docker 服务端", source_filter=["telegram"], role_filter=["user"], limit=50
    )
    assert users and hit_ids(hits) == users


def test_cjk_terms_alone_on_the_trigram_index_keep_bm25_order(
    mixed: tuple[Path, SessionDB],
) -> None:
    path, db = mixed
    ranked = first_column(
        path,
        "SELECT rowid FROM messages_fts_trigram WHERE messages_fts_trigram MATCH '\"服务端\"' "
        "ORDER BY rank",
    )
    assert hit_ids(db.search_messages("服务端", limit=100)) == ranked
    assert ranked != sorted(ranked, reverse=True)  # bm25, not merely newest first


def test_substring_matches_after_word_matches_leave_the_word_matches_out(
    mixed: tuple[Path, SessionDB],
) -> None:
    """``dockerd``/``修改docker服务端`` are no token ``docker``: the trigram route adds them
    after the word matches, each once, newest first, with the filters applied."""
    path, db = mixed
    words = first_column(
        path,
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'docker' ORDER BY rank",
    )
    glued = first_column(
        path,
        "SELECT id FROM messages WHERE content LIKE '%docker%' AND id NOT IN "
        "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'docker') ORDER BY id DESC",
    )
    assert len(words) < 20 and glued
    assert hit_ids(db.search_messages("docker", limit=100)) == words + glued
    tool = db.search_messages("docker", role_filter=["user"], source_filter=["cli"], limit=100)
    cli_users = set(
        first_column(
            path,
            "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user' AND s.source = 'cli'",
        )
    )
    assert hit_ids(tool) == [id_ for id_ in words + glued if id_ in cli_users]


PREFIX_TEXTS = [
    "deploy the build",
    "Deployed yesterday",
    "DEPLOYMENT window",
    "deploy服务端 glued to CJK",
    "déployer with a diacritic",
    "deploy_script underscore",
    "or order ordinal",
    "not note notebook",
    "near nearby",
    "the docker deployment failed",
    "redeploy is no prefix match",
    "nothing relevant here",
]
PREFIX_QUERIES = [
    "deploy*",
    "Deploy*",
    "deploym*",
    "o*",
    "n*",
    "deploy* NOT deployment",
    "deploy* -docker",
    "lorem OR deploy*",
    "deploy* docker",
    '"deploy"*',
    '"the docker deploy"*',
    "content:deploy*",
    "deploy_s*",
    "zzz*",
    "ord* OR not*",
    "-deploy* order",
    "here NOT relevant deploy*",
    "the deploy* build OR order",
    "the AND deploy* NOT build yesterday",
]


@pytest.fixture
def prefixes(tmp_path: Path) -> Iterator[tuple[Path, SessionDB]]:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("p", "cli")
    db.append_messages("p", [{"role": "user", "content": text} for text in PREFIX_TEXTS * 3])
    yield path, db
    db.close()


@pytest.mark.parametrize("query", PREFIX_QUERIES)
def test_a_spelled_out_prefix_matches_exactly_what_fts5s_prefix_matches(
    prefixes: tuple[Path, SessionDB], query: str
) -> None:
    """The word route alone (``match``), against FTS5's own MATCH of the same sanitized
    query on the same file."""
    from hermes_store.domain.query_syntax import query_items, sanitize_fts5_query

    path, db = prefixes
    expected = first_column(
        path,
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC",
        sanitize_fts5_query(query),
    )
    with db.store.read() as uow:
        spelled = uow.search.word_query(query_items(query))
        found = uow.search.match(spelled, limit=1000)
    assert sorted(hit_ids(found), reverse=True) == expected, spelled


def test_prefixes_are_spelled_out_only_where_that_is_exact(
    prefixes: tuple[Path, SessionDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_store.domain.query_syntax import query_items

    _, db = prefixes
    with db.store.read() as uow:
        spell = uow.search.word_query
        assert spell(query_items("Deploy*")) == (
            '("deploy" OR "deployed" OR "deployer" OR "deployment" OR "deploy服务端")'
        )
        assert spell(query_items("deploy* NOT deployment")) == (
            '("deploy" OR "deployed" OR "deployer" OR "deployment" OR "deploy服务端") '
            "NOT deployment"
        )
        assert spell(query_items("zzz*")) == "zzz*"  # no term: FTS5's prefix, as cheap
        assert spell(query_items('"deploy"*')) == '"deploy"*'  # a phrase stays one
        monkeypatch.setattr(sqlite_search, "PREFIX_TERMS", 4)
        assert spell(query_items("deploy*")) == "deploy*"  # too many terms
    # The vocabulary table is the connection's own: the file is not written.
    with sqlite3.connect(db.db_path) as raw:  # type: ignore[arg-type]
        names = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert not any(name.startswith("hermes_terms") for name in names)


def test_a_spelled_out_prefix_sees_rows_written_in_the_same_unit_and_after(
    prefixes: tuple[Path, SessionDB],
) -> None:
    from hermes_store.domain.query_syntax import query_items

    path, db = prefixes
    before = len(db.search_messages("deploy*", limit=100))
    with sqlite3.connect(path) as raw:  # another program writes a new form
        raw.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('p', 'user', 'deployable now', 1.0)"
        )
    hits = db.search_messages("deploy*", limit=100)
    assert len(hits) == before + 1
    with db.store.write() as uow:
        uow.messages.append("p", MessageIn("user", "deployless inside the unit"))
        spelled = uow.search.word_query(query_items("deploy*"))
        assert '"deployless"' in spelled and '"deployable"' in spelled
