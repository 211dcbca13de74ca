"""Session titles: cleaning, uniqueness, lineage numbering and resolution.

Tests named ``test_regression_*`` pin defects found and fixed in the package.
"""

from __future__ import annotations

from contextlib import closing

import pytest

from hermes_store import InvalidInputError, SessionDB, TitleConflictError
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.titles import MAX_TITLE_LENGTH, clean_title


def raw_titles(db: SessionDB) -> dict[str, str | None]:
    """Titles as stored, read on a connection of the test's own (plain sqlite3 on a file)."""
    if db.db_path is None:
        with db.store.engine.connect() as connection:
            return dict(connection.exec_driver_sql("SELECT id, title FROM sessions").all())
    with closing(sqlite3.connect(db.db_path)) as connection:
        return dict(connection.execute("SELECT id, title FROM sessions"))


# ----------------------------------------------------------------------
# cleaning
# ----------------------------------------------------------------------
CLEANING = [
    ("Fix Docker Build", "Fix Docker Build"),
    # ASCII control characters are removed
    ("Fix\x00Docker", "FixDocker"),
    ("a\x01b\x02c\x07d\x08e", "abcde"),
    ("esc\x1b[31mred", "esc[31mred"),
    ("a\x0bb\x0cc", "abc"),
    ("a\x0e\x1fb", "ab"),
    ("del\x7fete", "delete"),
    # zero-width, direction and other invisible characters are removed
    ("zero\u200bwidth", "zerowidth"),
    ("zw\u200cnj\u200dj", "zwnjj"),
    ("lrm\u200erlm\u200f", "lrmrlm"),
    ("\ufeffbom", "bom"),
    ("evil\u202egnp.exe", "evilgnp.exe"),
    ("a\u202ab\u202bc\u202cd\u202de", "abcde"),
    ("iso\u2066la\u2067te\u2068d\u2069", "isolated"),
    ("word\u2060joiner", "wordjoiner"),
    ("obj\ufffcrepl", "objrepl"),
    ("ann\ufff9ot\ufffaat\ufffbion", "annotation"),
    ("line\u2028sep\u2029arator", "lineseparator"),
    # whitespace is folded to one space and trimmed
    ("  Fix   Docker\tBuild \n", "Fix Docker Build"),
    ("multi\r\nline\n\ntitle", "multi line title"),
    ("\u3000ideographic\u3000space\u00a0nbsp", "ideographic space nbsp"),
    # non-ASCII text is kept
    ("修复 Docker 构建", "修复 Docker 构建"),
    ("Café déjà vu 🚀", "Café déjà vu 🚀"),
    # empty after cleaning: None, which clears the title
    ("", None),
    ("    ", None),
    ("\t\n\r", None),
    ("\x00\x01\u200b\ufeff", None),
    (None, None),
]


@pytest.mark.parametrize(("raw", "cleaned"), CLEANING)
def test_clean_title(raw: str | None, cleaned: str | None) -> None:
    assert clean_title(raw) == cleaned
    assert SessionDB.sanitize_title(raw) == cleaned


@pytest.mark.parametrize(("raw", "cleaned"), CLEANING)
def test_set_session_title_stores_the_cleaned_title(
    db: SessionDB, raw: str | None, cleaned: str | None
) -> None:
    db.create_session("s", "cli")
    db.set_session_title("s", "placeholder")
    assert db.set_session_title("s", raw) is True
    assert db.get_session_title("s") == cleaned
    assert raw_titles(db)["s"] == cleaned


def test_exactly_max_length_is_accepted(db: SessionDB) -> None:
    assert MAX_TITLE_LENGTH == SessionDB.MAX_TITLE_LENGTH == 100
    db.create_session("s", "cli")
    title = "x" * 100
    db.set_session_title("s", title)
    assert db.get_session_title("s") == title


def test_length_is_measured_after_cleaning(db: SessionDB) -> None:
    db.create_session("s", "cli")
    title = "  " + "y" * 100 + "\u200b\x00  "
    db.set_session_title("s", title)
    assert db.get_session_title("s") == "y" * 100


@pytest.mark.parametrize("title", ["x" * 101, "é" * 101, "a " * 50 + "bc", "z" * 10_000])
def test_too_long_title_is_refused_and_old_title_kept(db: SessionDB, title: str) -> None:
    db.create_session("s", "cli")
    db.set_session_title("s", "Old Title")
    with pytest.raises(ValueError) as caught:
        db.set_session_title("s", title)
    assert isinstance(caught.value, InvalidInputError)
    assert db.get_session_title("s") == "Old Title"
    with pytest.raises(ValueError):
        clean_title(title)


def test_empty_title_clears_and_frees_the_title(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.create_session("s2", "cli")
    db.set_session_title("s1", "Shared Name")
    db.set_session_title("s1", "   ")
    assert db.get_session_title("s1") is None
    db.set_session_title("s2", "Shared Name")  # free again
    assert db.get_session_title("s2") == "Shared Name"
    db.set_session_title("s2", None)
    assert db.get_session_title("s2") is None


# ----------------------------------------------------------------------
# uniqueness
# ----------------------------------------------------------------------
def test_title_unique_across_sessions(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.create_session("s2", "cli")
    db.set_session_title("s1", "Fix Docker Build")
    db.set_session_title("s2", "Something Else")
    with pytest.raises(TitleConflictError) as caught:
        db.set_session_title("s2", "Fix Docker Build")
    assert isinstance(caught.value, ValueError)
    assert raw_titles(db) == {"s1": "Fix Docker Build", "s2": "Something Else"}


@pytest.mark.parametrize(
    "variant", ["  Fix Docker Build  ", "Fix\u200b Docker Build", "Fix  Docker\tBuild\x00"]
)
def test_title_conflict_is_detected_after_cleaning(db: SessionDB, variant: str) -> None:
    db.create_session("s1", "cli")
    db.create_session("s2", "cli")
    db.set_session_title("s1", "Fix Docker Build")
    with pytest.raises(TitleConflictError):
        db.set_session_title("s2", variant)
    assert db.get_session_title("s2") is None


def test_same_session_may_reset_its_own_title(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.set_session_title("s1", "Mine")
    assert db.set_session_title("s1", "Mine") is True
    assert db.set_session_title("s1", " Mine ") is True
    assert db.get_session_title("s1") == "Mine"


def test_null_titles_may_repeat(db: SessionDB) -> None:
    for i in range(4):
        db.create_session(f"s{i}", "cli")
    db.set_session_title("s0", "Only Titled")
    db.set_session_title("s1", None)
    db.set_session_title("s2", "")
    db.set_session_title("s3", "\u200b")
    assert raw_titles(db) == {"s0": "Only Titled", "s1": None, "s2": None, "s3": None}


def test_set_title_of_unknown_session_returns_false(db: SessionDB) -> None:
    """As in the old class: False, not an exception, and nothing written."""
    db.create_session("real", "cli")
    assert db.set_session_title("ghost", "Anything") is False
    assert db.set_session_title("ghost", None) is False
    assert raw_titles(db) == {"real": None}
    assert db.get_session_title("ghost") is None


def test_set_title_of_unknown_session_still_raises_for_a_bad_or_taken_title(
    db: SessionDB,
) -> None:
    db.create_session("real", "cli")
    db.set_session_title("real", "Taken")
    with pytest.raises(TitleConflictError):
        db.set_session_title("ghost", "Taken")
    with pytest.raises(InvalidInputError, match="too long"):
        db.set_session_title("ghost", "x" * (MAX_TITLE_LENGTH + 1))
    assert raw_titles(db) == {"real": "Taken"}


def test_get_session_by_title(db: SessionDB) -> None:
    db.create_session("s1", "cli", model="m1")
    db.set_session_title("s1", "Lookup")
    found = db.get_session_by_title("Lookup")
    assert found == db.get_session("s1")
    assert db.get_session_by_title("lookup") is None  # exact, case-sensitive
    assert db.get_session_by_title("Look") is None


# ----------------------------------------------------------------------
# resolve_session_by_title
# ----------------------------------------------------------------------
def test_resolve_prefers_the_highest_number_in_the_lineage(db: SessionDB) -> None:
    db.create_session("base", "cli")
    db.set_session_title("base", "T")
    assert db.resolve_session_by_title("T") == "base"
    db.create_session("second", "cli")
    db.set_session_title("second", "T #2")
    assert db.resolve_session_by_title("T") == "second"
    db.create_session("third", "cli")
    db.set_session_title("third", "T #3")
    assert db.resolve_session_by_title("T") == "third"
    # an exact numbered title resolves to itself
    assert db.resolve_session_by_title("T #2") == "second"


def test_resolve_uses_the_number_not_the_creation_order(db: SessionDB) -> None:
    db.create_session("ten", "cli")
    db.set_session_title("ten", "Build #10")
    db.create_session("nine", "cli")  # newer, but a lower number
    db.set_session_title("nine", "Build #9")
    db.create_session("base", "cli")
    db.set_session_title("base", "Build")
    assert db.resolve_session_by_title("Build") == "ten"


def test_resolve_numbered_variants_without_the_base(db: SessionDB) -> None:
    db.create_session("s2", "cli")
    db.set_session_title("s2", "Orphaned #2")
    assert db.resolve_session_by_title("Orphaned") == "s2"


def test_resolve_ignores_titles_that_only_look_related(db: SessionDB) -> None:
    db.create_session("base", "cli")
    db.set_session_title("base", "Deploy")
    for session_id, title in (
        ("x1", "Deploy #abc"),
        ("x2", "Deploy#5"),
        ("x3", "Deploy #7 extra"),
        ("x4", "deploy #9"),
        ("x5", "Deployment #8"),
        ("x6", "Pre Deploy #6"),
    ):
        db.create_session(session_id, "cli")
        db.set_session_title(session_id, title)
    assert db.resolve_session_by_title("Deploy") == "base"


def test_resolve_unknown_title_is_none(db: SessionDB) -> None:
    db.create_session("s", "cli")
    db.set_session_title("s", "Known")
    assert db.resolve_session_by_title("Unknown") is None
    assert db.resolve_session_by_title("Know") is None


@pytest.mark.parametrize(
    ("base", "lookalike"),
    [
        ("100%", "100 percent #2"),
        ("a%", "abc #5"),
        ("%", "anything #3"),
        ("a_c", "abc #2"),
        ("_", "x #4"),
        ("__", "ab #2"),
        ("a\\%", "a\\xyz #2"),
        ("a\\_c", "a\\bc #2"),
    ],
)
def test_like_wildcards_in_titles_do_not_match_other_titles(
    db: SessionDB, base: str, lookalike: str
) -> None:
    db.create_session("literal", "cli")
    db.set_session_title("literal", base)
    db.create_session("other", "cli")
    db.set_session_title("other", lookalike)
    assert db.resolve_session_by_title(base) == "literal"
    assert db.get_next_title_in_lineage(base) == f"{base} #2"
    db.create_session("real_next", "cli")
    db.set_session_title("real_next", f"{base} #2")
    assert db.resolve_session_by_title(base) == "real_next"
    assert db.get_next_title_in_lineage(base) == f"{base} #3"


def test_wildcard_title_without_a_literal_match_resolves_to_none(db: SessionDB) -> None:
    db.create_session("s", "cli")
    db.set_session_title("s", "abc #2")
    assert db.resolve_session_by_title("%") is None
    assert db.resolve_session_by_title("a_c") is None
    assert db.get_next_title_in_lineage("a_c") == "a_c"


# ----------------------------------------------------------------------
# get_next_title_in_lineage
# ----------------------------------------------------------------------
def test_next_title_without_existing_is_the_base(db: SessionDB) -> None:
    assert db.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build"


def test_next_title_counts_up(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.set_session_title("s1", "Fix Docker Build")
    assert db.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #2"
    db.create_session("s2", "cli")
    db.set_session_title("s2", "Fix Docker Build #2")
    assert db.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #3"
    # from a numbered title the suffix is stripped first
    assert db.get_next_title_in_lineage("Fix Docker Build #2") == "Fix Docker Build #3"
    assert db.get_next_title_in_lineage("Fix Docker Build #17") == "Fix Docker Build #3"


def test_next_title_from_numbered_input_with_nothing_existing(db: SessionDB) -> None:
    assert db.get_next_title_in_lineage("X #2") == "X"
    assert db.get_next_title_in_lineage("X #2 #3") == "X #2"


def test_next_title_skips_past_the_highest_number(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.set_session_title("s1", "Gap")
    db.create_session("s5", "cli")
    db.set_session_title("s5", "Gap #5")
    assert db.get_next_title_in_lineage("Gap") == "Gap #6"


def test_next_title_ignores_non_numeric_suffixes(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.set_session_title("s1", "Plan #final")
    assert db.get_next_title_in_lineage("Plan") == "Plan"


def test_compression_lineage_end_to_end(db: SessionDB) -> None:
    """A session split by context compression continues under "<title> #N"."""
    db.create_session("first", "cli")
    db.set_session_title("first", "Refactor Gateway")
    previous = "first"
    for n in range(2, 5):
        child = f"part{n}"
        db.create_session(child, "cli", parent_session_id=previous)
        next_title = db.get_next_title_in_lineage(db.get_session_title(previous))
        assert next_title == f"Refactor Gateway #{n}"
        db.set_session_title(child, next_title)
        assert db.resolve_session_by_title("Refactor Gateway") == child
        previous = child
    assert [a["id"] for a in db.get_ancestors("part4")] == ["part4", "part3", "part2", "first"]


# ----------------------------------------------------------------------
# spec deviations
# ----------------------------------------------------------------------
def test_regression_c1_control_characters_survive_title_cleaning() -> None:
    """PACKAGE BUG (minor): C1 control characters (U+0080-U+009F) are kept in titles.

    The spec says titles are "cleaned of control characters"; U+009B (CSI) is
    a terminal escape introducer, just like ESC which *is* removed. Fix:
    hermes_store/titles.py, ``_ASCII_CONTROLS``: also match ``\\x80-\\x9f``
    (e.g. ``r"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]"``; NEL U+0085 is
    whitespace and would otherwise fold to a space, removing it is fine too).
    """
    cleaned = clean_title("Title\x9b[31mRed\x80\x9d\x9f")
    assert cleaned is not None
    assert not any(0x80 <= ord(ch) <= 0x9F for ch in cleaned), repr(cleaned)
