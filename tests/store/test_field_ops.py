"""Issue #30: archive, pin, paging, id search, counting and cleaning, meta and upkeep.

Every test runs on both backends (a real SQLite file, a real PostgreSQL
database) through ``SessionDB``; the asyncio twin is run through the same
story at the end. Times come from the test's clock, so ages are exact.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hermes_store import (
    InvalidInputError,
    SessionDB,
    SessionNotFoundError,
    StoreError,
)
from hermes_store.aio import AsyncSessionDB
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.uow.upkeep import LAST_PRUNE_KEY, LAST_VACUUM_KEY
from tests.conftest import ManualClock

DAY = 86400.0


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


def _snapshot(db: SessionDB) -> dict[str, Any]:
    """Everything a failed write must leave as it was: rows, flags, counters."""
    listed = db.list_sessions_rich(limit=100, include_children=True, include_archived=True)
    return {
        "sessions": sorted(
            (row["id"], row["message_count"], row["parent_session_id"]) for row in listed
        ),
        "live": _ids(db.list_sessions_rich(limit=100, include_children=True)),
        "count": db.session_count(include_archived=True),
        "unarchived": db.session_count(),
        "messages": db.message_count(),
        "usage": db.token_usage_by_model(),
    }


def _chain(db: SessionDB, clock: ManualClock) -> None:
    """root -> cont (a compression continuation), and a subagent child of root."""
    db.create_session("root", "cli", model="m")
    db.append_message("root", "user", "first part")
    db.create_session("sub", "cli", parent_session_id="root")
    db.end_session("root", "compression")
    clock.advance(1)
    db.create_session("cont", "cli", parent_session_id="root")
    db.append_message("cont", "user", "second part")


# ---------------------------------------------------------------------------
# archive and pin
# ---------------------------------------------------------------------------
def test_archive_hides_from_listing_and_count_and_restores(db: SessionDB) -> None:
    for name in ("a", "b", "c"):
        db.create_session(name, "cli")
    assert db.set_session_archived("b", True) is True
    assert _ids(db.list_sessions_rich()) == ["c", "a"]
    assert db.session_count() == 2
    assert db.session_count(include_archived=True) == 3
    assert db.session_count("cli") == 2
    assert _ids(db.list_sessions_rich(include_archived=True)) == ["c", "b", "a"]
    assert _ids(db.list_sessions_rich(limit=1, offset=1)) == ["a"]
    assert db.get_session("b") is not None  # nothing deleted
    db.set_session_archived("b", False)
    assert _ids(db.list_sessions_rich()) == ["c", "b", "a"]
    assert db.session_count() == 3


def test_archive_and_pin_take_the_whole_compression_chain(
    db: SessionDB, clock: ManualClock
) -> None:
    _chain(db, clock)
    db.create_session("other", "cli")
    # the conversation is listed once, as its tip
    assert _ids(db.list_sessions_rich()) == ["other", "cont"]
    db.set_session_archived("cont", True)  # the tip: its root goes too
    assert _ids(db.list_sessions_rich()) == ["other"]
    assert db.session_count() == 2  # sub (a subagent, not a continuation) and other
    db.set_session_archived("root", False)  # the root: the tip comes back with it
    assert _ids(db.list_sessions_rich()) == ["other", "cont"]
    db.set_session_pinned("root", True)
    listed = db.list_sessions_rich(limit=1, include_pinned=True)
    assert _ids(listed) == ["other", "cont"]  # the pinned conversation added after the page
    assert db.archive_stale_sessions(0) == 2  # other and sub; the pinned chain is spared
    assert db.session_count(include_archived=True) - db.session_count() == 2


def test_include_pinned_adds_to_the_first_page_only(db: SessionDB) -> None:
    for index in range(5):
        db.create_session(f"s{index}", "cli")
    db.set_session_pinned("s0", True)
    db.set_session_pinned("s4", True)
    assert _ids(db.list_sessions_rich(limit=2, include_pinned=True)) == ["s4", "s3", "s0"]
    assert _ids(db.list_sessions_rich(limit=2, offset=2, include_pinned=True)) == ["s2", "s1"]
    assert _ids(db.list_sessions_rich(limit=2)) == ["s4", "s3"]
    db.set_session_archived("s0", True)  # an archived pin shows only with archived ones
    assert _ids(db.list_sessions_rich(limit=2, include_pinned=True)) == ["s4", "s3"]
    assert _ids(db.list_sessions_rich(limit=2, include_pinned=True, include_archived=True)) == [
        "s4",
        "s3",
        "s0",
    ]


def test_unknown_or_bad_arguments_change_nothing(db: SessionDB, clock: ManualClock) -> None:
    _chain(db, clock)
    before = _snapshot(db)
    with pytest.raises(SessionNotFoundError):
        db.set_session_archived("nope", True)
    with pytest.raises(SessionNotFoundError):
        db.set_session_pinned("nope", True)
    with pytest.raises(InvalidInputError, match="archived"):
        db.set_session_archived("root", "yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="session_ids"):
        db.delete_sessions(["root", 5])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="session_ids"):
        db.delete_sessions("root")
    with pytest.raises(InvalidInputError, match="idle_days"):
        db.archive_stale_sessions(-1)
    with pytest.raises(InvalidInputError, match="key"):
        db.set_meta("", "x")
    with pytest.raises(InvalidInputError, match="value"):
        db.set_meta("k", 5)  # type: ignore[arg-type]
    assert _snapshot(db) == before
    assert db.get_meta("k") is None


def test_archive_stale_uses_the_last_message_and_spares_pins(
    db: SessionDB, clock: ManualClock
) -> None:
    db.create_session("old", "cli")
    db.create_session("old_but_active", "cli")
    db.create_session("pinned", "cli")
    db.set_session_pinned("pinned", True)
    clock.advance(10 * DAY)
    db.append_message("old_but_active", "user", "still here")
    db.create_session("new", "cli")
    assert db.archive_stale_sessions(5) == 1
    assert _ids(db.list_sessions_rich()) == ["new", "pinned", "old_but_active"]
    assert db.archive_stale_sessions(5) == 0  # again: nothing left to do
    assert db.archive_stale_sessions(0, exclude_pinned=False) == 3


def test_pruning_spares_pinned_sessions(db: SessionDB, clock: ManualClock) -> None:
    for name in ("keep", "drop"):
        db.create_session(name, "cli")
        db.append_message(name, "user", "text")
        db.end_session(name, "done")
    db.set_session_pinned("keep", True)
    clock.advance(100 * DAY)
    assert db.prune_sessions(older_than_days=90) == 1
    assert db.get_session("keep") is not None and db.get_session("drop") is None
    assert db.message_count() == 1


# ---------------------------------------------------------------------------
# counting, finding, cleaning
# ---------------------------------------------------------------------------
def test_session_count_ge(db: SessionDB) -> None:
    for index in range(3):
        db.create_session(f"s{index}", "cli" if index else "telegram")
    assert db.session_count_ge(0) and db.session_count_ge(3)
    assert not db.session_count_ge(4)
    assert db.session_count_ge(2, source="cli") and not db.session_count_ge(3, source="cli")
    db.set_session_archived("s1", True)
    assert not db.session_count_ge(3)
    assert db.session_count_ge(3, include_archived=True)
    with pytest.raises(InvalidInputError, match="n"):
        db.session_count_ge(-1)


def test_search_sessions_by_id_exact_prefix_substring(db: SessionDB, clock: ManualClock) -> None:
    for name in ("20260603_0902_ab", "20260603_0902", "x20260603_0902", "a%b_c", "axxbyc"):
        db.create_session(name, "cli")
        clock.advance(1)
    found = _ids(db.search_sessions_by_id("20260603_0902"))
    assert found == ["20260603_0902", "20260603_0902_ab", "x20260603_0902"]
    assert _ids(db.search_sessions_by_id("0902_ab")) == ["20260603_0902_ab"]
    assert _ids(db.search_sessions_by_id("%b_")) == ["a%b_c"]  # wildcards are literal
    assert _ids(db.search_sessions_by_id("20260603", limit=2)) == [
        "20260603_0902",
        "20260603_0902_ab",
    ]
    assert db.search_sessions_by_id("   ") == []
    db.set_session_archived("x20260603_0902", True)
    assert "x20260603_0902" in _ids(db.search_sessions_by_id("0902"))
    assert "x20260603_0902" not in _ids(db.search_sessions_by_id("0902", include_archived=False))
    assert db.search_sessions_by_id("20260603_0902_AB") == []  # ids are exact, case too


def test_delete_sessions_keeps_counters_exact_and_orphans_children(
    db: SessionDB, clock: ManualClock
) -> None:
    _chain(db, clock)
    db.create_session("other", "cli", model="m")
    db.append_message("other", "user", "x")
    db.update_token_counts("other", input_tokens=10, output_tokens=5)
    assert db.message_count() == 3
    assert db.delete_sessions(["root", "other", "nope", "root"]) == 2
    assert db.message_count() == 1
    assert db.session_count() == 2
    assert db.get_session("cont")["parent_session_id"] is None
    assert db.get_session("sub")["parent_session_id"] is None
    assert db.token_usage_by_model() == []
    assert db.delete_sessions([]) == 0


def test_empty_sessions_counted_and_deleted(db: SessionDB, clock: ManualClock) -> None:
    for name in ("empty", "in_use", "pinned", "archived", "full"):
        db.create_session(name, "cli")
    db.append_message("full", "user", "x")
    db.set_session_pinned("pinned", True)
    db.set_session_archived("archived", True)
    db.create_session("fresh", "cli")  # within the grace period
    assert db.count_empty_sessions() == 0
    clock.advance(2 * 3600)
    db.create_session("fresh", "cli")
    assert db.count_empty_sessions() == 3  # empty, in_use, fresh (made before the grace)
    assert db.count_empty_sessions(current_session_id="in_use") == 2
    before_messages = db.message_count()
    assert db.delete_empty_sessions(current_session_id="in_use") == 2
    assert db.count_empty_sessions(current_session_id="in_use") == 0
    assert db.get_session("in_use") is not None and db.get_session("empty") is None
    assert db.message_count() == before_messages
    assert db.session_count(include_archived=True) == 4
    with pytest.raises(InvalidInputError, match="grace_seconds"):
        db.count_empty_sessions(grace_seconds=-1)


# ---------------------------------------------------------------------------
# paging
# ---------------------------------------------------------------------------
def test_get_messages_pages_in_order_and_around_a_message(db: SessionDB) -> None:
    db.create_session("s", "cli")
    db.create_session("t", "cli")
    ids = [db.append_message("s", "user", f"m{index}") for index in range(7)]
    db.append_message("t", "user", "other session")
    everything = db.get_messages("s")
    assert [m["id"] for m in everything] == ids
    assert db.get_messages("s", limit=3) == everything[:3]
    assert db.get_messages("s", limit=3, offset=3) == everything[3:6]
    assert db.get_messages("s", offset=5) == everything[5:]
    assert db.get_messages("s", limit=0) == []
    around = db.get_messages_around(ids[3], before=2, after=1)
    assert [m["id"] for m in around] == ids[1:5]
    assert [m["id"] for m in db.get_messages_around(ids[0], before=3, after=0)] == ids[:1]
    assert [m["id"] for m in db.get_messages_around(ids[-1], before=0, after=5)] == ids[-1:]
    assert db.get_messages_around(10_000) == []
    with pytest.raises(InvalidInputError, match="limit"):
        db.get_messages("s", limit=-1)
    with pytest.raises(InvalidInputError, match="before"):
        db.get_messages_around(ids[0], before=-1)


# ---------------------------------------------------------------------------
# search options
# ---------------------------------------------------------------------------
def test_search_sorted_by_time_with_the_fields_asked_for(db: SessionDB, clock: ManualClock) -> None:
    db.create_session("s", "cli")
    ids = []
    for index in range(6):
        clock.advance(60)
        text = "docker " * (6 - index) + f"note {index}"  # older messages rank higher
        ids.append(db.append_message("s", "user", text))
    by_relevance = [hit["id"] for hit in db.search_messages("docker")]
    assert sorted(by_relevance) == sorted(ids)
    assert [hit["id"] for hit in db.search_messages("docker", sort="newest")] == ids[::-1]
    assert [hit["id"] for hit in db.search_messages("docker", sort="oldest")] == ids
    page = db.search_messages("docker", sort="newest", limit=2, offset=2)
    assert [hit["id"] for hit in page] == ids[::-1][2:4]
    slim = db.search_messages("docker", sort="oldest", fields=["id", "timestamp"], limit=2)
    assert slim == [
        {"id": hit["id"], "timestamp": hit["timestamp"]}
        for hit in db.search_messages("docker", sort="oldest", limit=2)
    ]
    with_context = db.search_messages("docker", fields=("id", "context"), limit=1)
    assert set(with_context[0]) == {"id", "context"} and with_context[0]["context"]
    with pytest.raises(InvalidInputError, match="sort"):
        db.search_messages("docker", sort="random")
    with pytest.raises(InvalidInputError, match="nonsense"):
        db.search_messages("docker", fields=["id", "nonsense"])
    with pytest.raises(InvalidInputError, match="fields"):
        db.search_messages("docker", fields="id")


def test_a_very_long_query_is_capped_not_refused(db: SessionDB) -> None:
    db.create_session("s", "cli")
    found = db.append_message("s", "user", "zeppelin hangar")
    pasted = "zeppelin " + "lorem ipsum " * 5000  # a pasted log: 60,000 characters
    assert [hit["id"] for hit in db.search_messages("zeppelin OR " + pasted)] == [found]
    assert db.search_messages("x" * 100_000) == []


# ---------------------------------------------------------------------------
# meta and upkeep
# ---------------------------------------------------------------------------
def test_meta_round_trip(db: SessionDB) -> None:
    assert db.get_meta("schedule") is None
    db.set_meta("schedule", "daily")
    db.set_meta("schedule", "weekly")
    assert db.get_meta("schedule") == "weekly"


def test_auto_prune_runs_at_most_once_per_interval_and_vacuums_when_due(
    db: SessionDB, clock: ManualClock
) -> None:
    db.create_session("old", "cli")
    db.end_session("old", "done")
    clock.advance(100 * DAY)
    done = db.maybe_auto_prune_and_vacuum(retention_days=90, min_interval_hours=24)
    assert done == {"skipped": False, "pruned": 1, "vacuumed": True}
    assert float(db.get_meta(LAST_PRUNE_KEY) or 0) == pytest.approx(clock.now, abs=1)
    vacuumed_at = db.get_meta(LAST_VACUUM_KEY)
    assert vacuumed_at is not None
    clock.advance(3600)
    assert db.maybe_auto_prune_and_vacuum()["skipped"] is True
    clock.advance(DAY)
    db.create_session("old2", "cli")
    db.end_session("old2", "done")
    clock.advance(100 * DAY)
    # pruned, but the last vacuum is younger than the interval asked for
    done = db.maybe_auto_prune_and_vacuum(min_vacuum_interval_days=365)
    assert done == {"skipped": False, "pruned": 1, "vacuumed": False}
    assert db.get_meta(LAST_VACUUM_KEY) == vacuumed_at
    clock.advance(DAY)
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": False, "pruned": 0, "vacuumed": False}


class _LockedDuringVacuum:
    """The store's real backend, with another connection holding the write lock while
    the vacuum runs: the vacuum then fails for real (StoreLockedError after its patience)."""

    def __init__(self, backend: Any, path: Path) -> None:
        self._backend = backend
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def vacuum(self, engine: Any, patience_s: float) -> None:
        holder = sqlite3.connect(self._path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            self._backend.vacuum(engine, patience_s)
        finally:
            holder.close()


@pytest.mark.sqlite_only("another connection holds SQLite's write lock during the vacuum")
def test_a_failed_vacuum_is_reported_and_not_recorded(db_path: Path, clock: ManualClock) -> None:
    with SessionDB(db_path, clock=clock, policy=ContentionPolicy(patience_s=0.2)) as db:
        db.create_session("old", "cli")
        db.end_session("old", "done")
        clock.advance(100 * DAY)
        real = db.store.backend
        db.store.backend = _LockedDuringVacuum(real, db_path)  # type: ignore[assignment]
        try:
            with pytest.raises(StoreError, match="locked"):
                db.vacuum()
            done = db.maybe_auto_prune_and_vacuum()
        finally:
            db.store.backend = real
        assert done["pruned"] == 1 and done["vacuumed"] is False
        assert "vacuum failed" in done["error"]
        assert db.get_meta(LAST_VACUUM_KEY) is None  # to be tried again
        db.create_session("old2", "cli")
        db.end_session("old2", "done")
        clock.advance(2 * DAY)
        clock.advance(100 * DAY)
        done = db.maybe_auto_prune_and_vacuum()
        assert done == {"skipped": False, "pruned": 1, "vacuumed": True}
        assert db.get_meta(LAST_VACUUM_KEY) is not None


def test_vacuum_records_its_time(db: SessionDB, clock: ManualClock) -> None:
    db.create_session("s", "cli")
    db.delete_session("s")
    db.vacuum()
    assert float(db.get_meta(LAST_VACUUM_KEY) or 0) == pytest.approx(clock.now, abs=1)


# ---------------------------------------------------------------------------
# the asyncio twin
# ---------------------------------------------------------------------------
def test_the_async_twin_does_the_same(store_url: str, clock: ManualClock) -> None:
    async def story() -> dict[str, Any]:
        async with AsyncSessionDB(store_url, clock=clock) as db:
            for name in ("a", "b", "c"):
                await db.create_session(name, "cli")
            first = await db.append_message("a", "user", "one")
            await db.append_message("a", "user", "two")
            await db.set_session_archived("b", True)
            await db.set_session_pinned("c", True)
            await db.set_meta("k", "v")
            result = {
                "listed": _ids(await db.list_sessions_rich()),
                "count": await db.session_count(),
                "ge": await db.session_count_ge(3, include_archived=True),
                "by_id": _ids(await db.search_sessions_by_id("a")),
                "page": [m["content"] for m in await db.get_messages("a", limit=1, offset=1)],
                "around": len(await db.get_messages_around(first, before=1, after=1)),
                "meta": await db.get_meta("k"),
                "empty": await db.count_empty_sessions(grace_seconds=0),
            }
            with pytest.raises(SessionNotFoundError):
                await db.set_session_archived("nope")
            result["stale"] = await db.archive_stale_sessions(0)
            result["deleted_empty"] = await db.delete_empty_sessions(grace_seconds=0)
            result["deleted"] = await db.delete_sessions(["a"])
            result["upkeep"] = await db.maybe_auto_prune_and_vacuum()
            await db.vacuum()
            return result

    assert asyncio.run(story()) == {
        "listed": ["c", "a"],
        "count": 2,
        "ge": True,
        "by_id": ["a"],
        "page": ["two"],
        "around": 2,
        "meta": "v",
        "empty": 0,  # b is archived, c is pinned, a has messages
        "stale": 1,
        "deleted_empty": 0,
        "deleted": 1,
        "upkeep": {"skipped": False, "pruned": 0, "vacuumed": False},
    }
