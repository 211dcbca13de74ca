"""Snippets on PostgreSQL mark a word found inside a path, a host or a version, as FTS5's do.

Since revision 0021 the word index holds the pieces of punctuated text, so
``docker`` finds ``/var/lib/docker``; the headline, made by PostgreSQL's own
parser, would read that path as one token and mark nothing. It is made on
the text cut the same way, and its marks are put back on the text as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.backends.postgresql.search import marks_on_text

TEXTS = (
    "/var/lib/docker is 98% full",
    "see src/recvworkerread.sql, then <run> it",
    "mail ops@example.io about v1.2.3 > v1.2 today.",
    "=" * 60 + " kubernetes " + "-" * 60,
)


@pytest.fixture
def pg(pg_url: URL) -> Iterator[SessionDB]:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("s", "cli")
        for text in TEXTS:
            db.append_message("s", "user", text)
        yield db


@pytest.mark.parametrize(
    ("query", "snippet"),
    [
        ("docker", "/var/lib/>>>docker<<< is 98% full"),
        ("recvworkerread.sql", "see src/>>>recvworkerread<<<.>>>sql<<<, then <run> it"),
        ("run", "see src/recvworkerread.sql, then <>>>run<<<> it"),
        ("example", "mail ops@>>>example<<<.io about v1.2.3 > v1.2 today."),
        ("kubernetes", "...>>>kubernetes<<<..."),
    ],
)
def test_a_word_inside_punctuated_text_is_marked_on_the_text_as_written(
    pg: SessionDB, query: str, snippet: str
) -> None:
    hits = pg.search_messages(query)
    assert [hit["snippet"] for hit in hits] == [snippet]


def test_marks_go_back_onto_the_characters_they_were_made_on() -> None:
    assert marks_on_text(" var >>>lib<<< ", "/var/lib/") == "/var/>>>lib<<</"
    assert marks_on_text(">>>a<<< b", None) == ">>>a<<< b"
    # A text whose own ">>>" the marks cannot be told from is left as the headline made it.
    assert marks_on_text("x>>>>>y<<<", "x>>y") == "x>>>>>y<<<"
    assert marks_on_text("<<<<>>>y<<<", "<y") == "<<<<>>>y<<<"


EDGE_NUMBERS = ("hello world 29", "29 hello world", "exit code 137", "see 29", "v 3.5 hello 7")


@pytest.mark.parametrize("query", ["hello", "world", "exit", "code", "see"])
def test_a_number_at_a_short_messages_edge_stays_in_its_snippet_as_on_sqlite(
    pg_url: URL, tmp_path: Path, query: str
) -> None:
    """PostgreSQL's headline fragment drops a number at its edge: ``hello world 29``
    gave ``>>>hello<<< world...`` where FTS5 shows the whole short message."""
    snippets = []
    for url in (pg_url.render_as_string(hide_password=False), f"sqlite:///{tmp_path / 'ref.db'}"):
        with SessionDB(url) as db:
            db.create_session("s", "cli")
            for text in EDGE_NUMBERS:
                db.append_message("s", "user", text)
            snippets.append(sorted(hit["snippet"] for hit in db.search_messages(query)))
    assert snippets[0] == snippets[1]
