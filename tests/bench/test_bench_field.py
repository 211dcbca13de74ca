"""The field benchmark's own machinery, at tiny sizes: the corpus and the arithmetic.

A baseline is only worth comparing against if the file it was measured on
can be made again exactly, and is the file it claims to be: so the corpus
generator must be deterministic from its seed, keep its lineage rules, and
pass its own verification; and the statistics that turn samples into a
verdict must say what they claim. Nothing here is timed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.field.corpus import RARE_COUNT, RARE_WORD, FieldSpec, build, make_template, verify
from bench.field.plan import plan_sessions
from bench.field.prune import cutoff_days
from bench.field.rows import Row
from bench.field.search import agreement
from hermes_store.backends.sqlite.library import driver as sqlite3

TINY = FieldSpec(messages=600, sessions=40, seed=7)


def _digest(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        digest = hashlib.sha256()
        for table, order in (("sessions", "id"), ("messages", "id")):
            for row in connection.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("field") / "template.db")


@pytest.fixture(scope="module")
def tiny(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("field") / "tiny.db"
    build(TINY, template, path, log=lambda _message: None)
    return path


def test_the_built_corpus_passes_its_own_verification(tiny: Path, template: Path) -> None:
    assert verify(tiny, template) == []


def test_the_corpus_has_the_planned_size_and_the_rare_word_exactly_so_often(tiny: Path) -> None:
    connection = sqlite3.connect(tiny)
    try:
        counts = connection.execute(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
        ).fetchone()
        rare = connection.execute(
            "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", (RARE_WORD,)
        ).fetchone()[0]
    finally:
        connection.close()
    assert counts == (TINY.sessions, TINY.messages)
    assert rare == RARE_COUNT


def test_the_same_seed_writes_the_same_file_and_another_seed_does_not(
    tiny: Path, template: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.db"
    build(TINY, template, again, log=lambda _message: None)
    assert _digest(again) == _digest(tiny)
    other = tmp_path / "other.db"
    build(FieldSpec(TINY.messages, TINY.sessions, seed=8), template, other, log=lambda _m: None)
    assert _digest(other) != _digest(tiny)


def test_the_plan_keeps_the_lineage_rules_of_the_old_class() -> None:
    plans = plan_sessions(400, 6_000, seed=3)
    assert len(plans) == 400
    assert sum(p.messages for p in plans) == 6_000
    titles = [p.title for p in plans if p.title]
    assert len(titles) == len(set(titles))  # the unique title index would refuse a duplicate
    starts = [p.started_at for p in plans]
    assert starts == sorted(starts)
    continuations = [p for p in plans if p.kind == "continuation"]
    assert continuations
    for plan in continuations:
        parent = plan.parent
        assert parent is not None and parent.end_reason == "compression"
        assert parent.ended_at is not None and plan.started_at >= parent.ended_at
    for plan in plans:
        if plan.parent is not None and plan.kind != "continuation":
            # Children of a compressed parent start while it runs: never taken for a tip.
            assert plan.parent.end_reason != "compression" or (
                plan.parent.ended_at is not None and plan.started_at < plan.parent.ended_at
            )
    numbered = [p for p in continuations if p.title]
    assert all(" #" in (p.title or "") for p in numbered)


def test_the_prune_cutoff_selects_exactly_the_asked_number(tiny: Path) -> None:
    _days, selected = cutoff_days(tiny, 30)
    assert selected == 30


def test_a_row_judges_its_statistic_and_marks_a_target_between_median_and_p95() -> None:
    search = Row("search", "q", "-", 0.050, "p95", store_s=[0.01] * 6 + [0.09], plain_s=[0.02] * 7)
    assert search.verdict == "MISS~"  # median 10 ms passes, the slowest (the p95) does not
    listing = Row("listing", "l", "", 0.005, "median", store_s=[0.004] * 6 + [0.009])
    listing.plain_s = [0.004] * 7
    assert listing.verdict == "PASS~"
    clear = Row("listing", "l", "", 0.005, "median", store_s=[0.001] * 3, plain_s=[0.002] * 3)
    assert clear.verdict == "PASS"
    assert clear.ratio == pytest.approx(0.5)


def test_agreement_says_whether_both_sides_returned_the_same_thing() -> None:
    assert agreement([1, 2, 3], [1, 2, 3]) == "same"
    assert agreement([1, 2, 3], [3, 2, 1]) == "same set"
    assert agreement([1, 2, 3], [1, 4, 5]) == "1/3 in common"
