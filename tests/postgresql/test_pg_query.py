"""The FTS5 -> tsquery translation: its rules, PostgreSQL accepting every result, and
PostgreSQL matching exactly what FTS5 matches for the same query."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from hermes_store.backends.postgresql.tsquery import (
    quote_lexeme,
    tsquery_text,
    unicode61_pieces,
)
from hermes_store.backends.postgresql.word_index import VECTOR_EXPRESSION, vector_of
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.query_syntax import (
    OPERATORS,
    query_items,
    sanitize_fts5_query,
)
from tests.conftest import pg_server_url
from tests.search.test_search import HOSTILE_PIECES, SANITIZER_TABLE


def translate(raw: str) -> str:
    return tsquery_text(query_items(raw))


# ----------------------------------------------------------------------
# the translation, rule by rule (pure: no database)
# ----------------------------------------------------------------------
TRANSLATION_TABLE = [
    ("docker", "'docker'"),
    ("docker deployment", "( 'docker' & 'deployment' )"),
    ("a AND b", "'a' & 'b'"),
    ("a OR b", "'a' | 'b'"),
    ("python NOT java", "'python' & !'java'"),
    ("a b OR c NOT d", "( 'a' & 'b' ) | 'c' & !'d'"),
    # FTS5 binds adjacent terms before NOT: a NOT (b AND c)
    ("a NOT b c", "'a' & !( 'b' & 'c' )"),
    ('a NOT "b c" d', "'a' & !( ( 'b' <-> 'c' ) & 'd' )"),
    ('"exact phrase"', "( 'exact' <-> 'phrase' )"),
    ('x NOT "a b"', "'x' & !( 'a' <-> 'b' )"),
    ("deploy*", "'deploy':*"),
    ('"foo bar"*', "( 'foo' <-> 'bar':* )"),
    # punctuated words: PostgreSQL's reading, or FTS5's pieces as a phrase
    ("chat-send", "( 'chat-send' | 'chat' <-> 'send' )"),
    ("chat-sen*", "( 'chat-sen':* | 'chat' <-> 'sen':* )"),
    ("v1.2", "( 'v1.2' | 'v1' <-> '2' )"),
    ("don't", "( 'don''t' | 'don' <-> 't' )"),
    ("back\\slash", "( 'back\\\\slash' | 'back' <-> 'slash' )"),
    ('"use chat-send"', "( 'use' <-> ( 'chat-send' | 'chat' <-> 'send' ) )"),
    ("AND*", "'AND':*"),
    ("and or not", "( 'and' & 'or' & 'not' )"),
    ("NEAR(a b)", "( 'NEAR' & 'a' & 'b' )"),
    ("hello AND", "'hello'"),
    ("NOT x", ""),
    ("docker AND NOT kubernetes", "'docker' & !'kubernetes'"),
    ("docker -kubernetes", "'docker' & !'kubernetes'"),
    ("a -b c", "( 'a' & 'c' ) & !'b'"),
    ("a OR NOT b", "'a'"),
    ("修复 café", "( '修复' & 'café' )"),
    ("", ""),
    ("AND OR NOT", ""),
    ('"', ""),
]


@pytest.mark.parametrize(("raw", "expected"), TRANSLATION_TABLE)
def test_translation_rule(raw: str, expected: str) -> None:
    assert translate(raw) == expected


def test_quote_lexeme_doubles_quotes_and_backslashes() -> None:
    assert quote_lexeme("plain") == "'plain'"
    assert quote_lexeme("it's") == "'it''s'"
    assert quote_lexeme("a\\b") == "'a\\\\b'"
    assert quote_lexeme("'\\'") == "'''\\\\'''"


@settings(max_examples=300, deadline=None)
@given(raw=st.text() | st.lists(HOSTILE_PIECES, max_size=12).map(" ".join))
def test_property_operators_come_only_from_the_query(raw: str) -> None:
    """Outside the quoted lexemes there are only the operators the items asked for."""
    items = query_items(raw)
    translated = tsquery_text(items)
    outside = "".join(translated.split("'")[0::2])  # '' inside a lexeme splits into ''
    allowed = set(" &|!()<->:*")
    assert set(outside) <= allowed, (raw, translated)
    assert outside.count("!") == items.count("NOT")
    words = [w for i in items if i not in OPERATORS for w in i.rstrip("*").strip('"').split()]
    two_readings = [w for w in words if unicode61_pieces(w) not in ([], [w])]
    assert outside.count("|") == items.count("OR") + len(two_readings)


# ----------------------------------------------------------------------
# against the real server
# ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg() -> Iterator[Connection]:
    """A connection to the test server; nothing is written outside a temp table."""
    engine = create_engine(pg_server_url(), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def _assert_accepted(pg: Connection, raw: str) -> None:
    """to_tsquery parses the translation of ``raw`` (an error would raise here)."""
    translated = translate(raw)
    if not translated:
        assert sanitize_fts5_query(raw) == ""
        return
    pg.execute(text("SELECT to_tsquery('simple', :q)"), {"q": translated}).scalar_one()
    pg.rollback()


@pytest.mark.parametrize(("raw", "_expected"), SANITIZER_TABLE)
def test_every_sanitizer_table_query_is_accepted_by_to_tsquery(
    pg: Connection, raw: str, _expected: str
) -> None:
    _assert_accepted(pg, raw)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.text())
def test_property_any_text_translates_to_valid_tsquery(pg: Connection, raw: str) -> None:
    _assert_accepted(pg, raw)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.lists(
        HOSTILE_PIECES | st.sampled_from(["'", "\\", "''", "\\'", ":*", "&", "|", "!"]), max_size=14
    ).map("".join)
    | st.lists(
        HOSTILE_PIECES | st.sampled_from(["'", "\\", "<->", "&", "|", "!", ":*"]), max_size=10
    ).map(" ".join)
)
def test_property_operator_soup_translates_to_valid_tsquery(pg: Connection, raw: str) -> None:
    _assert_accepted(pg, raw)


def test_quoted_lexemes_keep_quotes_and_backslashes_as_text(pg: Connection) -> None:
    """tsquery's own syntax characters inside a word reach the parser as text."""
    document = "don't use C:\\tmp\\x it's a & b | !c"
    for raw in ("don't", "it's", "C:\\tmp\\x", "a & b", "b | !c", "don't it's"):
        matched = pg.execute(
            text(f"SELECT {vector_of(':d')} @@ to_tsquery('simple', :q)"),
            {"d": document, "q": translate(raw)},
        ).scalar_one()
        assert matched, raw
    pg.rollback()


# ----------------------------------------------------------------------
# the same matches as FTS5 (differential: one corpus, random queries)
# ----------------------------------------------------------------------
VOCABULARY = ["alpha", "alphabet", "beta", "gamma", "delta", "epsilon"]


def _corpus(separators: list[str]) -> list[str]:
    documents = []
    for seed in range(80):
        rng = random.Random(seed)
        words = rng.choices(VOCABULARY, k=rng.randint(1, 6))
        text_ = words[0]
        for word in words[1:]:
            text_ += rng.choice(separators) + word
        documents.append(text_)
    return documents


# What PostgreSQL's parser glues into one token and FTS5 cuts: paths, hosts, emails, URLs,
# versions, floats, Windows paths, underscores, signs.
GLUES = [".", "/", "@", ":", "://", "\\", "_", "-", "+", "%", "~", "#", "=", "?", "&"]
NUMBERS = ["1.2", "v1.2.3", "3.14", "-5", "1.5e10", "2024-05-01", "10.0.0.1"]


def _punctuated_corpus() -> list[str]:
    """Words joined by glue, numbers beside them: ``alpha.beta/gamma``, ``v1.2.3``, ..."""
    documents = []
    for seed in range(120):
        rng = random.Random(seed)
        text_ = rng.choice(VOCABULARY)
        for _ in range(rng.randint(0, 5)):
            text_ += rng.choice([*GLUES, " ", " "]) + rng.choice([*VOCABULARY, *NUMBERS])
        documents.append(text_)
    documents += [
        "see src/alpha.sql and beta@gamma.org",
        "http://alpha.example.org/beta?gamma=1&delta=2 done",
        "C:\\alpha\\beta.txt at 1.5 and v1.2.3",
        "alpha_beta gamma-delta epsilon.alphabet",
    ]
    return documents


CORPORA = {
    "spaced": _corpus([" "]),
    "hyphenated": _corpus([" ", " ", "-", ", "]),
    "punctuated": _punctuated_corpus(),
}


@pytest.fixture(scope="module")
def twin_indexes(pg: Connection) -> Iterator[tuple[sqlite3.Connection, Connection]]:
    """Each corpus in an FTS5 table and in a PostgreSQL temp table, rowids equal."""
    with closing(sqlite3.connect(":memory:")) as lite:
        for name, documents in CORPORA.items():
            rows = list(enumerate(documents, 1))
            pg.execute(text(f"CREATE TEMP TABLE {name} (id INTEGER PRIMARY KEY, content TEXT)"))
            pg.execute(
                text(f"INSERT INTO {name} VALUES (:id, :content)"),
                [{"id": i, "content": c} for i, c in rows],
            )
            lite.execute(f"CREATE VIRTUAL TABLE {name} USING fts5(content)")
            lite.executemany(f"INSERT INTO {name}(rowid, content) VALUES (?, ?)", rows)
        pg.commit()
        yield lite, pg
    for name in CORPORA:
        pg.execute(text(f"DROP TABLE {name}"))
    pg.commit()


def _assert_same_matches(
    twins: tuple[sqlite3.Connection, Connection],
    corpus: str,
    raw: str,
) -> None:
    """PostgreSQL, on the stored vector's expression, finds exactly what FTS5 finds."""
    lite, pg = twins
    fts5 = sanitize_fts5_query(raw)
    if not fts5:
        return
    expected = {
        r[0] for r in lite.execute(f"SELECT rowid FROM {corpus} WHERE {corpus} MATCH ?", (fts5,))
    }
    found = set(
        pg.execute(
            text(f"SELECT id FROM {corpus} WHERE {VECTOR_EXPRESSION} @@ to_tsquery('simple', :q)"),
            {"q": translate(raw)},
        ).scalars()
    )
    pg.rollback()
    assert found == expected, (raw, fts5, translate(raw))


BASIC_PIECES = [
    *VOCABULARY,
    "alp*",
    "gam*",
    "alpha*",
    "-beta",
    "-gam*",
    "AND",
    "OR",
    "NOT",
    "missing",
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.lists(st.sampled_from([*BASIC_PIECES, '"']), min_size=1, max_size=8).map(" ".join))
def test_property_postgresql_matches_what_fts5_matches(
    twin_indexes: tuple[sqlite3.Connection, Connection], raw: str
) -> None:
    """Words, prefixes, phrases and operators (with FTS5's precedence) on spaced text."""
    _assert_same_matches(twin_indexes, "spaced", raw)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.lists(
        st.sampled_from([*BASIC_PIECES, "alpha-beta", "beta-gamma", "gam-del*", "alpha-bet*"]),
        min_size=1,
        max_size=6,
    ).map(" ".join)
)
def test_property_punctuated_terms_match_what_fts5_matches(
    twin_indexes: tuple[sqlite3.Connection, Connection], raw: str
) -> None:
    """Hyphenated terms and text, written together or apart: the same matches.

    The vector holds the pieces of a compound where FTS5 puts them (revision
    0021), so a phrase before or after one matches as on FTS5.
    """
    _assert_same_matches(twin_indexes, "hyphenated", raw)


PUNCTUATED_TERMS = [
    "alpha.beta",
    "alpha/beta",
    "src/alpha.sql",
    "beta@gamma.org",
    "gamma.org",
    "alpha:beta",
    "http://alpha.example.org/beta",
    "example.org",
    "alpha\\beta.txt",
    "C:\\alpha",
    "alpha_beta",
    "v1.2.3",
    "v1.2",
    "1.2",
    "3.14",
    "1.5",
    "1.5e10",
    "-5",
    "10.0.0.1",
    "2024-05-01",
    "gamma=1",
    "beta.gam*",
    "alpha.bet*",
    "v1.*",
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.lists(
        st.sampled_from([*BASIC_PIECES, *PUNCTUATED_TERMS, *NUMBERS, '"']),
        min_size=1,
        max_size=6,
    ).map(" ".join)
)
def test_property_paths_hosts_emails_versions_floats_urls_match_what_fts5_matches(
    twin_indexes: tuple[sqlite3.Connection, Connection], raw: str
) -> None:
    """Words glued by punctuation in the text and in the query: the same matches as FTS5."""
    _assert_same_matches(twin_indexes, "punctuated", raw)


@pytest.mark.parametrize("raw", [*PUNCTUATED_TERMS, *NUMBERS, "alpha", "sql", "org", "txt"])
def test_each_punctuated_term_matches_what_fts5_matches(
    twin_indexes: tuple[sqlite3.Connection, Connection], raw: str
) -> None:
    _assert_same_matches(twin_indexes, "punctuated", raw)


def test_a_phrase_beside_a_hyphenated_compound_matches_as_on_fts5(
    twin_indexes: tuple[sqlite3.Connection, Connection],
) -> None:
    """The case the glued vector missed (the compound took a position of its own): found now."""
    lite, pg = twin_indexes
    lite.execute("CREATE VIRTUAL TABLE probe USING fts5(content)")
    try:
        for raw, document in (
            ('"gamma alpha"', "gamma alpha-beta"),
            ("beta-gamma", "beta gamma-delta"),
        ):
            lite.execute("DELETE FROM probe")
            lite.execute("INSERT INTO probe(content) VALUES (?)", (document,))
            fts5 = sanitize_fts5_query(raw)
            assert lite.execute("SELECT 1 FROM probe WHERE probe MATCH ?", (fts5,)).fetchall()
            matched = pg.execute(
                text(f"SELECT {vector_of(':d')} @@ to_tsquery('simple', :q)"),
                {"d": document, "q": translate(raw)},
            ).scalar_one()
            pg.rollback()
            assert matched is True, raw
    finally:
        lite.execute("DROP TABLE probe")
