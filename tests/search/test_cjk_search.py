"""Chinese, Japanese and Korean search finds what a substring scan finds, with the usual shape.

Every test but the pure helper one runs on SQLite and PostgreSQL (the ``db`` fixture).
"""

from __future__ import annotations

import pytest

from hermes_store import SessionDB
from hermes_store.domain.query_syntax import query_items
from hermes_store.domain.substrings import has_cjk, make_snippet, substring_query

CONVERSATIONS = {
    "zh-1": (
        "telegram",
        [
            ("user", "我们的聊天记录记忆断裂问题需要尽快解决，用户反馈很多"),
            ("assistant", "修改youer服务端的计划已经完成，明天部署到生产环境"),
            ("user", "记忆断裂是因为上下文压缩把会话分割了吗？"),
            ("assistant", "是的，压缩之后新的会话没有继承标题"),
        ],
    ),
    "zh-2": (
        "cli",
        [
            ("user", "请帮我检查一下数据库的备份脚本"),
            ("assistant", "备份脚本每天凌晨三点运行，日志在/var/log/backup目录"),
        ],
    ),
    "ja-1": (
        "discord",
        [
            ("user", "東京で来週の会議があります。議事録を準備してください"),
            ("assistant", "承知しました。会議の議事録テンプレートを作成します"),
            ("user", "データベースのバックアップも確認してください"),
        ],
    ),
    "ko-1": (
        "cli",
        [
            ("user", "서울에서 내일 회의가 있습니다. 일정을 확인해 주세요"),
            ("assistant", "내일 오전 10시에 회의가 잡혀 있습니다"),
            ("user", "데이터베이스 백업도 확인해 주세요"),
        ],
    ),
    "en-1": (
        "cli",
        [
            ("user", "the docker deployment keeps failing on the staging cluster"),
            ("assistant", "check the youer service logs and the helm chart values"),
        ],
    ),
}

TERMS = [
    "记忆断裂",  # 4 chars inside running text
    "记忆",  # 2 chars: below the trigram length
    "youer",  # Latin glued into a CJK run
    "备份脚本",
    "服务端",
    "会議",
    "議事録",
    "データベース",
    "회의",
    "일정을",
    "백업",
    "확인해 주세요",  # two terms, implicit AND
    "docker",
    "部署",
]


@pytest.fixture
def cjk_db(db: SessionDB) -> SessionDB:
    for session_id, (source, messages) in CONVERSATIONS.items():
        db.create_session(session_id, source)
        db.append_messages(session_id, [{"role": r, "content": c} for r, c in messages])
    return db


def _substring_scan(db: SessionDB, term: str) -> set[int]:
    """The reference: messages whose content contains every word of ``term``.

    Plain Python over every stored message, so it means the same on both
    backends (case folded, as SQLite's LIKE and PostgreSQL's ILIKE do).
    """
    words = [word.casefold() for word in term.split()]
    return {
        message["id"]
        for session_id in CONVERSATIONS
        for message in db.get_messages(session_id)
        if all(word in (message["content"] or "").casefold() for word in words)
    }


@pytest.mark.parametrize("term", TERMS)
def test_recall_equals_a_substring_scan(cjk_db: SessionDB, term: str) -> None:
    expected = _substring_scan(cjk_db, term)
    assert expected, f"the corpus must contain {term!r}"
    found = {hit["id"] for hit in cjk_db.search_messages(term, limit=100)}
    assert found == expected


def test_results_have_the_usual_shape_snippet_and_context(cjk_db: SessionDB) -> None:
    (hit,) = [h for h in cjk_db.search_messages("youer") if h["session_id"] == "zh-1"]
    assert set(hit) == {
        "id",
        "session_id",
        "role",
        "timestamp",
        "snippet",
        "context",
        "tool_name",
        "source",
        "model",
        "session_started",
    }
    assert ">>>youer<<<" in hit["snippet"]
    assert [c["role"] for c in hit["context"]] == ["user", "assistant", "user"]
    assert hit["context"][1]["content"].startswith("修改youer")
    short = cjk_db.search_messages("记忆")
    assert all(">>>记忆<<<" in h["snippet"] for h in short)


def test_filters_apply_to_cjk_search(cjk_db: SessionDB) -> None:
    assert {h["session_id"] for h in cjk_db.search_messages("会議")} == {"ja-1"}
    assert cjk_db.search_messages("会議", source_filter=["cli"]) == []
    assert {
        h["session_id"] for h in cjk_db.search_messages("확인", exclude_sources=["discord"])
    } == {"ko-1"}
    user_only = cjk_db.search_messages("회의", role_filter=["user"])
    assert [h["role"] for h in user_only] == ["user"]
    assert len(cjk_db.search_messages("회의")) == 2
    assert len(cjk_db.search_messages("회의", limit=1, offset=1)) == 1


def test_boolean_operators_work_on_both_substring_routes(cjk_db: SessionDB) -> None:
    either = {h["session_id"] for h in cjk_db.search_messages("议事 OR 会議 OR 회의")}
    assert either == {"ja-1", "ko-1"}
    trigram_not = {h["id"] for h in cjk_db.search_messages("记忆断裂 NOT 压缩")}
    assert len(trigram_not) == 1
    short_not = cjk_db.search_messages("记忆 NOT 用户")
    assert [h["snippet"] for h in short_not] == [
        "记忆断裂是因为上下文压缩把会话分割了吗？".replace("记忆", ">>>记忆<<<", 1)
    ]


def test_adjacent_terms_bind_before_not_on_every_route(cjk_db: SessionDB) -> None:
    """``a NOT b c`` is ``a NOT (b AND c)`` (FTS5's grammar) on the LIKE route too."""
    (first,) = [
        h["id"] for h in cjk_db.search_messages("记忆断裂 问题") if h["session_id"] == "zh-1"
    ]
    # short terms (LIKE/ILIKE): the message with 压缩 and 分割 is excluded, the other kept
    assert [h["id"] for h in cjk_db.search_messages("记忆 NOT 压缩 分割")] == [first]
    # long terms (the trigram index on SQLite, ILIKE on PostgreSQL): the same answer
    assert [h["id"] for h in cjk_db.search_messages("记忆断裂 NOT 上下文 分割了")] == [first]


def test_negation_excludes_on_both_substring_routes(cjk_db: SessionDB) -> None:
    """``-term`` and ``AND NOT`` exclude there too; only exclusions find nothing."""
    (first,) = [
        h["id"] for h in cjk_db.search_messages("记忆断裂 问题") if h["session_id"] == "zh-1"
    ]
    for query in ("记忆断裂 -压缩", "-压缩 记忆断裂", "记忆断裂 AND NOT 压缩", "记忆 -压缩"):
        assert [h["id"] for h in cjk_db.search_messages(query)] == [first], query
    short = cjk_db.search_messages("记忆 -压缩")  # the snippet marks what was found
    assert ">>>记忆<<<" in short[0]["snippet"] and ">>>压缩" not in short[0]["snippet"]
    for query in ("-记忆断裂", "NOT 记忆", "-压缩 -记忆"):
        assert cjk_db.search_messages(query) == [], query


def test_messages_written_later_are_indexed(cjk_db: SessionDB) -> None:
    cjk_db.append_message("zh-2", "user", "新的消息提到量子计算")
    assert [h["session_id"] for h in cjk_db.search_messages("量子计算")] == ["zh-2"]
    cjk_db.clear_messages("zh-2")
    assert cjk_db.search_messages("量子计算") == []


def test_query_routing_helpers() -> None:
    assert has_cjk("修改youer") and has_cjk("회의") and has_cjk("カタカナ")
    assert not has_cjk("plain ascii and ünïcödé")
    long_terms = substring_query(query_items("记忆断裂 OR 服务端"))
    assert long_terms is not None and long_terms.fts == '"记忆断裂" OR "服务端"'
    short = substring_query(query_items("记忆 断裂"))
    assert short is not None and short.fts is None
    assert short.like_params == {"p_like0": "%记忆%", "p_like1": "%断裂%"}
    assert substring_query(query_items("AND")) is None
    # PostgreSQL: no FTS5 trigram table, every term is an ILIKE test (pg_trgm serves it)
    on_pg = substring_query(query_items("记忆断裂 OR 服务端"), trigram=False, like="ILIKE")
    assert on_pg is not None and on_pg.fts is None
    assert on_pg.like_sql == (
        "(m.content ILIKE :p_like0 ESCAPE '\\' OR m.content ILIKE :p_like1 ESCAPE '\\')"
    )
    assert on_pg.like_params == {"p_like0": "%记忆断裂%", "p_like1": "%服务端%"}
    assert make_snippet("abc 记忆 def", ["记忆"]) == "abc >>>记忆<<< def"
