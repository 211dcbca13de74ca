"""Full-text search: the sanitizer's rules, and search_messages end to end on both backends.

The end-to-end tests run on SQLite and PostgreSQL alike (the ``db`` fixture);
where the two engines cannot agree to the character (FTS5's bm25 against
``ts_rank``, snippet() against ``ts_headline``), they assert the shared
contract: the hit set, the markers around the matched word, best match first
where that is unambiguous.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.query_syntax import OPERATORS, sanitize_fts5_query
from hermes_store.repositories import SearchRepository

RESULT_KEYS = {
    "id",
    "session_id",
    "role",
    "timestamp",
    "snippet",
    "context",
    "source",
    "model",
    "session_started",
    "tool_name",
}


# ----------------------------------------------------------------------
# the sanitizer, rule by rule (design document: _sanitize_fts5_query)
# ----------------------------------------------------------------------
SANITIZER_TABLE = [
    # plain words: unchanged (implicit AND)
    ("docker deployment", "docker deployment"),
    ("  docker   deployment  ", "docker deployment"),
    ("", ""),
    ("   ", ""),
    # unmatched quotes are stripped
    ('"unterminated', "unterminated"),
    ('unterminated"', "unterminated"),
    ('a"b', "a b"),
    ('"', ""),
    ('"""', ""),
    ('say "hi there" and "oops', 'say "hi there" and oops'),
    # balanced phrases are kept (inner whitespace folded)
    ('"exact phrase"', '"exact phrase"'),
    ('"a b" OR "c d"', '"a b" OR "c d"'),
    ('"  spaced   out  "', '"spaced out"'),
    ('"chat-send"', '"chat-send"'),
    ('""', ""),
    ('"..."', ""),
    # special characters are stripped
    ("C++", "C"),
    ("(((", ""),
    (")))", ""),
    ("(docker)", "docker"),
    ("+term", "term"),
    ("a^b", "a b"),
    ("{x}", "x"),
    ("hello)", "hello"),
    ("*", ""),
    ("**x", "x"),
    ("-", ""),
    ("...", ""),
    ("_", ""),
    # hyphenated and dotted (and other punctuated) terms are quoted
    ("chat-send", '"chat-send"'),
    ("my-long-name", '"my-long-name"'),
    ("v1.2", '"v1.2"'),
    ("state.db", '"state.db"'),
    ("foo.bar.baz", '"foo.bar.baz"'),
    ("foo:bar", '"foo:bar"'),
    ("don't", '"don\'t"'),
    ("use chat-send now", 'use "chat-send" now'),
    # dangling boolean operators are removed, at either end, and runs collapse
    ("hello AND", "hello"),
    ("AND hello", "hello"),
    ("hello OR", "hello"),
    ("OR hello OR", "hello"),
    ("NOT x", ""),
    ("x NOT", "x"),
    ("AND", ""),
    ("OR", ""),
    ("NOT", ""),
    ("AND OR NOT", ""),
    ("a AND OR b", "a AND b"),
    ('"a" OR', '"a"'),
    # operators with two operands are kept
    ("docker OR kubernetes", "docker OR kubernetes"),
    ("python NOT java", "python NOT java"),
    # negation keeps its meaning: AND NOT is NOT, -term excludes one term, and
    # a branch with nothing but exclusions finds nothing (it is dropped)
    ("docker AND NOT kubernetes", "docker NOT kubernetes"),
    ("docker NOT AND kubernetes", "docker NOT kubernetes"),
    ("docker -kubernetes", "docker NOT kubernetes"),
    ("-kubernetes docker", "docker NOT kubernetes"),
    ("a -b c", "a c NOT b"),
    ("a -b -c", "a NOT b NOT c"),
    ("a NOT b -c", "a NOT b NOT c"),
    ("a NOT b AND c", "a AND c NOT b"),
    ('x -"exact phrase"', 'x NOT "exact phrase"'),
    ("x -deploy*", "x NOT deploy*"),
    ("x -chat-send", 'x NOT "chat-send"'),
    ("a -b OR c -d", "a NOT b OR c NOT d"),
    ("NOT docker", ""),
    ("-docker", ""),
    ("-docker -kubernetes", ""),
    ("NOT a b", ""),
    ("a OR NOT b", "a"),
    ("NOT a OR b", "b"),
    ("-a OR b", "b"),
    ("- docker", "docker"),
    ("x - y", "x y"),
    ("a AND b", "a AND b"),
    ("hello   AND   world", "hello AND world"),
    # lowercase and/or/not are ordinary words
    ("and or not", "and or not"),
    # NEAR is only ever a word
    ("NEAR(a b)", '"NEAR" a b'),
    # prefix * is kept on words, quoted terms and phrases
    ("deploy*", "deploy*"),
    ("dep* kub*", "dep* kub*"),
    ("x**", "x*"),
    ("chat-sen*", '"chat-sen"*'),
    ('"foo bar"*', '"foo bar"*'),
    ("AND*", '"AND"*'),
    # control characters cannot be parsed: they separate words
    ("foo\x00bar", "foo bar"),
    ("tab\tnew\nline\r", "tab new line"),
    # non-ASCII words are barewords
    ("修复 café", "修复 café"),
]


@pytest.mark.parametrize(("raw", "expected"), SANITIZER_TABLE)
def test_sanitizer_rule(raw: str, expected: str) -> None:
    assert sanitize_fts5_query(raw) == expected


@pytest.fixture(scope="module")
def fts_table() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
    connection.executemany(
        "INSERT INTO t(content) VALUES (?)",
        [("hello world",), ("chat-send v1.2",), ("AND OR NOT NEAR",), ("修复 café",)],
    )
    yield connection
    connection.close()


def _assert_accepted(connection: sqlite3.Connection, raw: str) -> None:
    query = sanitize_fts5_query(raw)
    assert isinstance(query, str)
    if query == "":
        return
    assert query == query.strip()
    words = query.split()
    assert words[0] not in OPERATORS and words[-1] not in OPERATORS, query
    # raises sqlite3.OperationalError on any FTS5 syntax error
    connection.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    assert sanitize_fts5_query(query) == query  # sanitizing twice changes nothing


@pytest.mark.parametrize(("raw", "_expected"), SANITIZER_TABLE)
def test_every_table_result_is_valid_fts5(
    fts_table: sqlite3.Connection, raw: str, _expected: str
) -> None:
    _assert_accepted(fts_table, raw)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=st.text())
def test_property_any_text_sanitizes_to_empty_or_valid_fts5(
    fts_table: sqlite3.Connection, raw: str
) -> None:
    _assert_accepted(fts_table, raw)


HOSTILE_PIECES = st.sampled_from(
    [
        "AND",
        "OR",
        "NOT",
        "NEAR",
        '"',
        "*",
        "(",
        ")",
        "-",
        ".",
        ":",
        "^",
        "+",
        "{",
        "}",
        ",",
        "'",
        "\\",
        "_",
        " ",
        "\t",
        "\x00",
        "\x1a",
        "\x7f",
        "\u00a0",
        "\u200b",
        "\u2028",
        "\ufeff",
        "\u0301",
        "a",
        "b1",
        "x-y",
        "é",
        "中文",
        "\U0001f600",
        # PostgreSQL's tsquery syntax, which must reach it only as text
        "&",
        "|",
        "!",
        "<->",
        ":*",
        "''",
        "\\'",
    ]
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    raw=st.lists(HOSTILE_PIECES, max_size=14).map("".join)
    | st.lists(HOSTILE_PIECES, max_size=10).map(" ".join)
)
def test_property_operator_soup_sanitizes_to_empty_or_valid_fts5(
    fts_table: sqlite3.Connection, raw: str
) -> None:
    _assert_accepted(fts_table, raw)


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.from_regex(r"[a-z][a-z0-9]{1,8}", fullmatch=True), min_size=1, max_size=4),
    separator=st.sampled_from(["-", ".", ":", "/", "'", "@"]),
)
def test_property_a_punctuated_term_finds_exactly_the_text_containing_it(
    parts: list[str], separator: str
) -> None:
    term = separator.join(parts)
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
        connection.execute("INSERT INTO t(rowid, content) VALUES (1, ?)", (f"see {term} here",))
        # the same words, but not adjacent and in order: must not match
        scattered = " zzz ".join(reversed(parts)) if len(parts) > 1 else "unrelated"
        connection.execute("INSERT INTO t(rowid, content) VALUES (2, ?)", (scattered,))
        query = sanitize_fts5_query(term)
        rows = connection.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    assert rows == [(1,)], (term, query)


# ----------------------------------------------------------------------
# end to end through SessionDB.search_messages
# ----------------------------------------------------------------------
def add(db: SessionDB, session_id: str, role: str, content: str | None, **fields: Any) -> int:
    return db.append_message(session_id, role, content, **fields)


@pytest.fixture
def corpus(db: SessionDB) -> dict[str, int]:
    db.create_session("cli_s", "cli", model="model-cli")
    db.create_session("tg_s", "telegram", model="model-tg")
    texts = {
        "docker_deploy": ("cli_s", "user", "the docker deployment failed again"),
        "docker_only": ("cli_s", "assistant", "docker is great for containers"),
        "deploy_only": ("cli_s", "user", "our deployment pipeline is slow"),
        "kubernetes": ("cli_s", "assistant", "kubernetes schedules the pods"),
        "python_only": ("cli_s", "user", "python scripts are handy"),
        "python_java": ("cli_s", "assistant", "python and java together"),
        "phrase": ("tg_s", "user", "this is the exact phrase we want"),
        "phrase_reversed": ("tg_s", "assistant", "phrase exact but reversed"),
        "hyphen": ("tg_s", "user", "use the chat-send tool to reply"),
        "hyphen_apart": ("tg_s", "assistant", "first chat and then send it"),
        "dotted": ("tg_s", "user", "release v1.2 shipped"),
        "dotted_other": ("tg_s", "assistant", "release v1.3 pending"),
        "deploying": ("tg_s", "user", "we are deploying now"),
        "deploy": ("tg_s", "assistant", "please deploy it"),
        "redeploy": ("tg_s", "user", "redeploy the thing"),
    }
    return {key: add(db, sid, role, text) for key, (sid, role, text) in texts.items()}


def found(db: SessionDB, query: str, **kwargs: Any) -> set[int]:
    return {r["id"] for r in db.search_messages(query, **kwargs)}


def test_implicit_and(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, "docker deployment") == {corpus["docker_deploy"]}
    assert found(db, "docker") == {corpus["docker_deploy"], corpus["docker_only"]}


def test_quoted_phrase(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, '"exact phrase"') == {corpus["phrase"]}
    assert found(db, "exact phrase") == {corpus["phrase"], corpus["phrase_reversed"]}


def test_or(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, "docker OR kubernetes") == {
        corpus["docker_deploy"],
        corpus["docker_only"],
        corpus["kubernetes"],
    }


def test_not(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, "python NOT java") == {corpus["python_only"]}
    assert found(db, "python") == {corpus["python_only"], corpus["python_java"]}


def test_negation_finds_what_was_asked_not_its_opposite(db: SessionDB) -> None:
    """``AND NOT``, ``NOT`` and ``-term`` exclude; only exclusions find nothing (both backends).

    Before, ``docker AND NOT kubernetes`` was searched as ``docker AND kubernetes``,
    ``NOT docker`` as ``docker`` and ``docker -kubernetes`` found kubernetes.
    """
    db.create_session("n", "cli")
    docker = add(db, "n", "user", "the docker image builds")
    both = add(db, "n", "assistant", "docker on a kubernetes cluster")
    add(db, "n", "user", "kubernetes schedules the pods")
    docker_helm = add(db, "n", "user", "docker and helm charts")
    for query in (
        "docker AND NOT kubernetes",
        "docker NOT kubernetes",
        "docker -kubernetes",
        "-kubernetes docker",
        'docker -"kubernetes cluster"',
        "docker -kube*",
    ):
        assert found(db, query) == {docker, docker_helm}, query
    assert found(db, "docker -kubernetes -helm") == {docker}
    assert found(db, "docker -helm image") == {docker}
    for query in ("NOT docker", "-docker", "-docker -kubernetes", "NOT docker kubernetes"):
        assert found(db, query) == set(), query
    assert found(db, "helm OR NOT kubernetes") == {docker_helm}
    assert found(db, "helm OR docker -helm") == {docker, both, docker_helm}
    assert found(db, "docker OR -docker") == {docker, both, docker_helm}


@settings(max_examples=150, deadline=None)
@given(
    wanted=st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1, max_size=3),
    excluded=st.lists(
        st.tuples(st.sampled_from(["delta", "epsilon", "zeta"]), st.sampled_from(["-", "NOT"])),
        min_size=1,
        max_size=3,
    ),
    seed=st.integers(0, 1000),
)
def test_property_excluded_words_never_appear_in_a_hit_and_wanted_ones_always_do(
    wanted: list[str], excluded: list[tuple[str, str]], seed: int
) -> None:
    """An oracle of its own: hits hold every wanted word and no excluded one, on real FTS5.

    ``-word`` goes anywhere; ``NOT word`` / ``AND NOT word`` at the end (before
    another term it would exclude the run, as FTS5 reads ``a NOT b c``).
    """
    rng = random.Random(seed)
    pieces: list[str] = list(wanted)
    trailing: list[str] = []
    for word, form in excluded:
        if form == "-":
            pieces.insert(rng.randint(0, len(pieces)), f"-{word}")
        else:
            trailing.append(rng.choice(["NOT", "AND NOT"]) + f" {word}")
    raw = " ".join(pieces + trailing)
    vocabulary = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    documents = [" ".join(random.Random(n).sample(vocabulary, n % 5 + 1)) for n in range(120)]
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
        connection.executemany("INSERT INTO t(content) VALUES (?)", [(d,) for d in documents])
        query = sanitize_fts5_query(raw)
        hits = {r[0] for r in connection.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,))}
    excluded_words = {word for word, _form in excluded}
    expected = {
        n + 1
        for n, document in enumerate(documents)
        if set(wanted) <= set(document.split()) and not excluded_words & set(document.split())
    }
    assert hits == expected, (raw, query)


def test_prefix(db: SessionDB, corpus: dict[str, int]) -> None:
    prefixed = {
        corpus["docker_deploy"],
        corpus["deploy_only"],
        corpus["deploying"],
        corpus["deploy"],
    }
    results = db.search_messages("deploy*")
    # every word starting with "deploy" is found, and ranked before anything else
    # (substring matches such as "redeploy" may fill the rest of the page, after them)
    assert {r["id"] for r in results[:4]} == prefixed
    assert all("deploy" in r["snippet"].lower() for r in results)
    assert corpus["redeploy"] not in {r["id"] for r in results[:4]}
    assert len(results) <= 5
    # without the star only the word itself is a word match, ranked first
    exact = db.search_messages("deploy")
    assert exact[0]["id"] == corpus["deploy"]
    assert [r["id"] for r in exact].count(corpus["deploy"]) == 1
    assert ">>>deploy<<<" in exact[0]["snippet"]


def test_hyphenated_term_finds_text_containing_it(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, "chat-send") == {corpus["hyphen"]}
    assert found(db, "use chat-send") == {corpus["hyphen"]}


def test_dotted_term(db: SessionDB, corpus: dict[str, int]) -> None:
    assert found(db, "v1.2") == {corpus["dotted"]}
    assert found(db, "v1.3") == {corpus["dotted_other"]}


def test_unmatched_quote_and_dangling_operator_still_search(
    db: SessionDB, corpus: dict[str, int]
) -> None:
    docker = {corpus["docker_deploy"], corpus["docker_only"]}
    assert found(db, '"docker') == docker
    assert found(db, "docker AND") == docker
    assert found(db, "OR docker") == docker
    assert found(db, "(docker)") == docker


@pytest.mark.parametrize(
    "query",
    ['"', "AND", "OR", "NOT", "(((", ")))", "*", "**", '""', "   ", "", "^", "{}", "-", "AND OR"],
)
def test_malformed_query_finds_nothing_without_raising(
    db: SessionDB, corpus: dict[str, int], query: str
) -> None:
    assert db.search_messages(query) == []


def test_snippet_marks_the_match(db: SessionDB) -> None:
    db.create_session("snip", "cli")
    add(db, "snip", "user", "the quick brown Zanzibar fox jumps")
    (hit,) = db.search_messages("zanzibar")
    assert ">>>Zanzibar<<<" in hit["snippet"]
    assert hit["snippet"].count(">>>") == 1 and hit["snippet"].count("<<<") == 1


def test_snippet_marks_every_matched_term(db: SessionDB) -> None:
    db.create_session("snip", "cli")
    add(db, "snip", "user", "alpha beta gamma delta")
    (hit,) = db.search_messages("alpha gamma")
    assert ">>>alpha<<<" in hit["snippet"] and ">>>gamma<<<" in hit["snippet"]
    assert ">>>beta<<<" not in hit["snippet"]


def test_snippet_of_a_long_message_is_shortened(db: SessionDB) -> None:
    db.create_session("long", "cli")
    add(db, "long", "user", " ".join(["filler"] * 300 + ["marmoset"] + ["filler"] * 300))
    (hit,) = db.search_messages("marmoset")
    assert ">>>marmoset<<<" in hit["snippet"]
    assert "..." in hit["snippet"]
    assert len(hit["snippet"]) < 1000


def test_result_keys_and_values(db: SessionDB, clock: Any) -> None:
    db.create_session("keys", "discord", model="the-model")
    clock.advance(5)
    message_id = add(db, "keys", "assistant", "platypus facts", tool_name="wiki")
    (hit,) = db.search_messages("platypus")
    assert set(hit) == RESULT_KEYS
    (message,) = db.get_messages("keys")
    session = db.get_session("keys")
    assert hit["id"] == message_id
    assert hit["session_id"] == "keys"
    assert hit["role"] == "assistant"
    assert hit["timestamp"] == message["timestamp"]
    assert hit["source"] == "discord"
    assert hit["model"] == "the-model"
    assert hit["tool_name"] == "wiki"
    assert hit["session_started"] == session["started_at"]
    assert hit["session_started"] < hit["timestamp"]
    assert hit["context"] == [{"role": "assistant", "content": "platypus facts"}]


def test_context_is_the_neighbours_in_the_same_session(db: SessionDB) -> None:
    db.create_session("A", "cli")
    db.create_session("B", "cli")
    add(db, "A", "user", "alpha one")
    add(db, "B", "user", "beta one")
    add(db, "A", "assistant", "alpha xylophone target")
    add(db, "B", "assistant", "beta two")
    add(db, "A", "user", "alpha three")
    add(db, "B", "user", "beta three")
    (hit,) = db.search_messages("xylophone")
    assert hit["session_id"] == "A"
    assert hit["context"] == [
        {"role": "user", "content": "alpha one"},
        {"role": "assistant", "content": "alpha xylophone target"},
        {"role": "user", "content": "alpha three"},
    ]


def test_context_at_the_edges_of_a_session(db: SessionDB) -> None:
    db.create_session("A", "cli")
    db.create_session("B", "cli")
    add(db, "B", "user", "beta before")
    add(db, "A", "user", "firstword opens")
    add(db, "B", "user", "beta middle")
    add(db, "A", "assistant", "middle of A")
    add(db, "B", "user", "beta later")
    add(db, "A", "user", "lastword closes")
    add(db, "B", "user", "beta after")
    (first,) = db.search_messages("firstword")
    assert first["context"] == [
        {"role": "user", "content": "firstword opens"},
        {"role": "assistant", "content": "middle of A"},
    ]
    (last,) = db.search_messages("lastword")
    assert last["context"] == [
        {"role": "assistant", "content": "middle of A"},
        {"role": "user", "content": "lastword closes"},
    ]


def test_context_of_a_neighbour_without_content_is_empty_text(db: SessionDB) -> None:
    db.create_session("A", "cli")
    add(db, "A", "assistant", None, tool_calls=[{"id": "c1"}])
    add(db, "A", "tool", "capybara output", tool_call_id="c1", tool_name="t")
    (hit,) = db.search_messages("capybara")
    assert hit["context"] == [
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": "capybara output"},
    ]


def test_context_content_is_cut_to_200_characters(db: SessionDB) -> None:
    db.create_session("A", "cli")
    before = "P" * 500
    match = "needleword " + "M" * 500
    after = "N" * 300
    add(db, "A", "user", before)
    add(db, "A", "assistant", match)
    add(db, "A", "user", after)
    (hit,) = db.search_messages("needleword")
    assert [c["content"] for c in hit["context"]] == [before[:200], match[:200], after[:200]]
    assert all(len(c["content"]) == 200 for c in hit["context"])


@pytest.fixture
def sourced(db: SessionDB) -> dict[tuple[str, str], int]:
    ids = {}
    for source in ("cli", "telegram", "discord"):
        db.create_session(f"{source}_s", source, model=f"model-{source}")
        for role in ("user", "assistant"):
            ids[(source, role)] = add(db, f"{source}_s", role, f"filterword from {source}")
    return ids


def test_source_filter(db: SessionDB, sourced: dict[tuple[str, str], int]) -> None:
    cli = {sourced[("cli", "user")], sourced[("cli", "assistant")]}
    discord = {sourced[("discord", "user")], sourced[("discord", "assistant")]}
    assert found(db, "filterword") == set(sourced.values())
    assert found(db, "filterword", source_filter=["cli"]) == cli
    assert found(db, "filterword", source_filter=["cli", "discord"]) == cli | discord
    assert found(db, "filterword", source_filter="cli") == cli
    assert found(db, "filterword", source_filter=["slack"]) == set()
    hits = db.search_messages("filterword", source_filter=["discord"])
    assert {h["source"] for h in hits} == {"discord"}
    assert {h["model"] for h in hits} == {"model-discord"}


def test_exclude_sources(db: SessionDB, sourced: dict[tuple[str, str], int]) -> None:
    cli = {sourced[("cli", "user")], sourced[("cli", "assistant")]}
    assert found(db, "filterword", exclude_sources=["telegram", "discord"]) == cli
    assert found(db, "filterword", exclude_sources=["slack"]) == set(sourced.values())
    assert found(db, "filterword", source_filter=["cli"], exclude_sources=["cli"]) == set()


def test_role_filter(db: SessionDB, sourced: dict[tuple[str, str], int]) -> None:
    users = {v for (_, role), v in sourced.items() if role == "user"}
    assert found(db, "filterword", role_filter=["user"]) == users
    assert found(db, "filterword", role_filter="user") == users
    assert found(db, "filterword", role_filter=["user", "assistant"]) == set(sourced.values())
    assert found(db, "filterword", role_filter=["tool"]) == set()
    assert found(db, "filterword", role_filter=["assistant"], source_filter=["telegram"]) == {
        sourced[("telegram", "assistant")]
    }


def test_limit_and_offset_paging(db: SessionDB) -> None:
    db.create_session("page", "cli")
    all_ids = {add(db, "page", "user", f"pagingword number {i}") for i in range(25)}
    assert len(db.search_messages("pagingword")) == 20  # default limit
    pages = [db.search_messages("pagingword", limit=10, offset=o) for o in (0, 10, 20)]
    assert [len(p) for p in pages] == [10, 10, 5]
    page_ids = [{r["id"] for r in page} for page in pages]
    assert page_ids[0].isdisjoint(page_ids[1]) and page_ids[1].isdisjoint(page_ids[2])
    assert page_ids[0] | page_ids[1] | page_ids[2] == all_ids
    assert db.search_messages("pagingword", limit=10, offset=25) == []
    assert db.search_messages("pagingword", limit=0) == []
    assert len(db.search_messages("pagingword", limit=100)) == 25


def test_results_are_ranked_best_first(db: SessionDB) -> None:
    db.create_session("rank", "cli")
    weak = add(db, "rank", "user", "ocelot " + " ".join(f"word{i}" for i in range(60)))
    strong = add(db, "rank", "user", "ocelot ocelot ocelot")
    assert [r["id"] for r in db.search_messages("ocelot")] == [strong, weak]


def test_search_sees_a_turn_written_in_one_transaction(db: SessionDB) -> None:
    db.create_session("turn", "cli")
    ids = db.append_messages(
        "turn",
        [{"role": "user", "content": "lemurword question"}, {"role": "assistant", "content": "x"}],
    )
    (hit,) = db.search_messages("lemurword")
    assert hit["id"] == ids[0]
    assert hit["context"] == [
        {"role": "user", "content": "lemurword question"},
        {"role": "assistant", "content": "x"},
    ]


def test_search_is_case_insensitive(db: SessionDB) -> None:
    db.create_session("case", "cli")
    message_id = add(db, "case", "user", "Kubernetes Cluster")
    assert found(db, "kubernetes") == {message_id}
    assert found(db, "KUBERNETES cluster") == {message_id}


def test_search_never_raises_for_any_text(db: SessionDB) -> None:
    db.create_session("f", "cli")
    add(db, "f", "user", "hello world chat-send v1.2 AND OR NOT 修复 café it's C:\\tmp & | !")

    @settings(max_examples=150, deadline=None)
    @given(query=st.text() | st.lists(HOSTILE_PIECES, max_size=12).map(" ".join))
    def check(query: str) -> None:
        results = db.search_messages(query)
        assert isinstance(results, list)
        assert all(r["session_id"] == "f" for r in results)

    check()
    # searching writes nothing
    assert db.message_count() == 1
    assert [m["content"] for m in db.get_messages("f")][0].startswith("hello world")


def test_quotes_and_backslashes_in_a_query_are_text(db: SessionDB) -> None:
    db.create_session("q", "cli")
    apostrophe = add(db, "q", "user", "don't panic")
    path = add(db, "q", "assistant", "saved to C:\\tmp\\out.txt")
    symbols = add(db, "q", "user", "cats & dogs | birds")
    assert found(db, "don't") == {apostrophe}
    assert found(db, "'don't'") == {apostrophe}
    assert found(db, "C:\\tmp\\out.txt") == {path}
    assert found(db, "cats & dogs") == {symbols}
    assert found(db, "cats | !birds") == {symbols}


def test_a_punctuated_term_finds_its_words_written_together_or_apart(db: SessionDB) -> None:
    db.create_session("p", "cli")
    joined = add(db, "p", "user", "run chat-send now")
    apart = add(db, "p", "user", "run chat send now")
    spaced = add(db, "p", "user", "chat then send")
    assert found(db, "chat-send") == {joined, apart}
    assert found(db, "chat-sen*") == {joined, apart}
    assert found(db, '"run chat-send now"') == {joined, apart}
    assert found(db, "chat send") == {joined, apart, spaced}


def test_adjacent_terms_bind_before_not(db: SessionDB) -> None:
    """FTS5's grammar: ``a NOT b c`` is ``a NOT (b AND c)``, on both backends."""
    db.create_session("n", "cli")
    only_a = add(db, "n", "user", "apple")
    a_b = add(db, "n", "user", "apple banana")
    add(db, "n", "user", "apple banana cherry")
    assert found(db, "apple NOT banana cherry") == {only_a, a_b}
    assert found(db, "apple NOT banana") == {only_a}


def test_a_query_the_engine_rejects_finds_nothing_and_the_store_goes_on(
    db: SessionDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The safety net behind the sanitizer: a rejected query is no error, and no harm.

    The sanitizer never lets a bad query through (see the property tests), so
    the word query is replaced here by one each engine rejects: a lone
    operator, an FTS5 syntax error on SQLite and a tsquery syntax error on
    PostgreSQL (where it also aborts the transaction).
    """
    db.create_session("r", "cli")
    message_id = add(db, "r", "user", "wombat burrow")
    with monkeypatch.context() as patch:
        patch.setattr(
            SearchRepository,
            "word_query",
            lambda self, items: "&" if self._c.dialect.name == "postgresql" else "AND",
        )
        assert db.search_messages("wombat") == []
    assert found(db, "wombat") == {message_id}
    assert add(db, "r", "assistant", "wombat reply") > message_id


def test_a_huge_message_is_stored_and_found_by_its_words(db: SessionDB) -> None:
    """2 MB of distinct words: more than one PostgreSQL tsvector may hold (1 MB).

    PostgreSQL indexes the first 100,000 characters of a message for word
    search (revision 0001); SQLite's FTS5 all of it. Either way the message
    is stored, and a word near its start is found and marked.
    """
    db.create_session("big", "cli")
    words = " ".join(f"w{n:07d}x" for n in range(200_000))
    message_id = add(db, "big", "tool", f"aardvark {words}", tool_name="dump")
    (hit,) = db.search_messages("aardvark")
    assert hit["id"] == message_id
    assert hit["snippet"].startswith(">>>aardvark<<<") and hit["snippet"].endswith("...")
    assert len(hit["context"][0]["content"]) == 200


# ----------------------------------------------------------------------
# an empty list of allowed sources, at every layer; each search's own rank edge
# ----------------------------------------------------------------------
@pytest.mark.parametrize("query", ["findable", "部署", "able"])  # words, CJK, a substring
def test_an_empty_source_filter_allows_no_source_at_every_layer(db: SessionDB, query: str) -> None:
    """The old class built ``s.source IN ()`` from ``[]``: no session passes. ``None`` is
    no filter, as an empty ``exclude_sources`` or ``role_filter`` is."""
    import asyncio

    from hermes_store.aio import AsyncSessionDB

    db.create_session("s", "cli")
    db.append_message("s", "user", "findable words 部署服务")
    assert len(db.search_messages(query)) == 1, "the query finds the message unfiltered"
    assert len(db.search_messages(query, source_filter=["cli"])) == 1
    assert db.search_messages(query, source_filter=[]) == []
    assert db.search_messages(query, source_filter=[], role_filter=["user"]) == []
    assert len(db.search_messages(query, exclude_sources=[], role_filter=[])) == 1
    with db.store.read() as uow:
        assert uow.search.search(query, source_filter=[]) == []
        assert len(uow.search.search(query, source_filter=None)) == 1

    async def through_asyncio() -> list[Any]:
        aio = AsyncSessionDB(db=db)
        try:
            return await aio.search_messages(query, source_filter=[])
        finally:
            await aio.close()

    assert asyncio.run(through_asyncio()) == []


@pytest.mark.sqlite_only("the word index's rank windows and the trigram route")
def test_each_search_in_one_unit_decides_the_common_word_rule_for_itself(
    db_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """K or more word matches: no substring matches follow them; fewer: they do.

    The answer comes back with the search's own ranking (the first window's
    edge), so a search run after another one in the same unit cannot take the
    earlier one's answer (there is no edge kept on the repository to reset).
    """
    from hermes_store import Store
    from hermes_store.repositories import search

    monkeypatch.setattr(search, "RANK_WINDOW", 3)
    with SessionDB(db_path) as db:
        db.create_session("s", "cli")
        for n in range(5):
            db.append_message("s", "user", f"common word {n}")
        db.append_message("s", "user", "部署common了")  # glued into CJK: a substring only
        db.append_message("s", "user", "rare once")
        db.append_message("s", "user", "部署rare了")
    with Store(db_path) as store, store.read() as uow:
        counts = [len(uow.search.search(q)) for q in ("common", "rare", "common", "rare")]
    assert counts == [5, 2, 5, 2]
