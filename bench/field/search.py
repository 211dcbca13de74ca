"""The search and listing rows: ``SessionDB`` against the plain yardstick on the corpus.

Both sides keep one warm connection for the whole section, as a running
gateway does; each row's first call of each side is an untimed warm-up (the
file's pages come into the cache there, not in the samples). Each row also
says whether the two sides returned the same thing, so a timing never
compares different work without saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .plain import PlainField
from .queries import CLASSES, FILTERS, QueryClass
from .rows import Reps, Row, interleave

SEARCH_TARGET_S = 0.050
LISTING_TARGET_S = 0.005

Log = Callable[[str], None]


def agreement(store: Sequence[Any], plain: Sequence[Any]) -> str:
    """``same`` (same items, same order), ``same set`` (other order) or ``k/n in common``."""
    if list(store) == list(plain):
        return "same"
    if set(store) == set(plain):
        return "same set"
    return f"{len(set(store) & set(plain))}/{max(len(store), len(plain))} in common"


def search_rows(
    db: Any, plain: PlainField, reps: Reps, log: Log, classes: Sequence[QueryClass] = CLASSES
) -> list[Row]:
    rows = []
    for query_class in classes:
        for variant, filters in FILTERS.items():
            query = query_class.query
            row = Row("search", query_class.label, variant, SEARCH_TARGET_S, "p95")
            row.matches = plain.count_matches(query, **filters)
            store_hits, plain_hits = interleave(
                row,
                lambda q=query, f=filters: db.search_messages(q, **f),
                lambda q=query, f=filters: plain.search_messages(q, **f),
                reps,
            )
            row.store_hits, row.plain_hits = len(store_hits), len(plain_hits)
            row.agreement = agreement([m["id"] for m in store_hits], [m["id"] for m in plain_hits])
            log(
                f"    {query_class.label} [{variant}]: store p95 {row.p95('store') * 1e3:.0f} ms,"
                f" plain p95 {row.p95('plain') * 1e3:.0f} ms ({len(row.store_s)} reps)"
            )
            rows.append(row)
    return rows


def listing_targets(path: Path) -> dict[str, Any]:
    """What the listing rows ask for, found once (untimed) on the corpus."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        one = lambda sql, *args: connection.execute(sql, args).fetchone()[0]  # noqa: E731
        sessions = one("SELECT COUNT(*) FROM sessions")
        roots = one("SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NULL")
        telegram = one(
            "SELECT COUNT(*) FROM sessions WHERE parent_session_id IS NULL AND source = 'telegram'"
        )
        lineage = one(
            "SELECT substr(title, 1, instr(title, ' #') - 1) AS base FROM sessions "
            "WHERE title LIKE '% #%' GROUP BY base ORDER BY COUNT(*) DESC, base LIMIT 1"
        )
        titles = [
            title
            for (title,) in connection.execute(
                "SELECT title FROM sessions WHERE title IS NOT NULL ORDER BY started_at"
            )
        ]
        parents = dict(connection.execute("SELECT id, parent_session_id FROM sessions"))
    finally:
        connection.close()
    depth: dict[str, int] = {}

    def depth_of(session_id: str) -> int:
        chain = []
        current: str | None = session_id
        while current is not None and current not in depth:
            chain.append(current)
            current = parents.get(current)
        base = depth[current] if current is not None else -1
        for offset, item in enumerate(reversed(chain), start=1):
            depth[item] = base + offset
        return depth[session_id]

    # A title with no lineage of its own, a third of the way through time.
    bases = {title.split(" #")[0] for title in titles if " #" in title}
    singles = [t for t in titles if " #" not in t and t not in bases and not t.startswith("Cron:")]
    single = singles[len(singles) // 3]
    tip = max(parents, key=lambda s: (depth_of(s), s))
    root = tip
    while parents.get(root) is not None:
        root = parents[root]  # type: ignore[assignment]
    return {
        "sessions": sessions,
        "roots": roots,
        "telegram_roots": telegram,
        "lineage_base": lineage,
        "single_title": single,
        "deepest_tip": tip,
        "deepest_root": root,
        "depth": depth_of(tip),
    }


def _ids(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]


def listing_rows(db: Any, plain: PlainField, path: Path, reps: Reps, log: Log) -> list[Row]:
    t = listing_targets(path)
    log(
        f"    {t['sessions']:,} sessions, {t['roots']:,} listed (no parent); lineage "
        f"{t['lineage_base']!r}; chain of depth {t['depth']}"
    )
    last = max(0, t["roots"] - 20)
    last_telegram = max(0, t["telegram_roots"] - 20)
    cases: list[tuple[str, str, Callable[[], Any], Callable[[], Any], Callable[[Any], Any]]] = []
    for offset in (0, t["roots"] // 2, last):
        cases.append(
            (
                "list_sessions_rich(limit=20)",
                f"offset {offset:,}",
                lambda o=offset: db.list_sessions_rich(limit=20, offset=o),
                lambda o=offset: plain.list_sessions_rich(limit=20, offset=o),
                _ids,
            )
        )
    for offset in (0, t["sessions"] // 2, max(0, t["sessions"] - 20)):
        cases.append(
            (
                "  same, include_children=True",
                f"offset {offset:,}",
                lambda o=offset: db.list_sessions_rich(limit=20, offset=o, include_children=True),
                lambda o=offset: plain.list_sessions_rich(
                    limit=20, offset=o, include_children=True
                ),
                _ids,
            )
        )
    for offset in (0, last_telegram):
        cases.append(
            (
                "  same, source='telegram'",
                f"offset {offset:,}",
                lambda o=offset: db.list_sessions_rich(source="telegram", limit=20, offset=o),
                lambda o=offset: plain.list_sessions_rich(source="telegram", limit=20, offset=o),
                _ids,
            )
        )

    def usage(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
        keys = ("model", "session_count", "total_input", "total_output")
        return [(*(r[k] for k in keys), round(r["total_cost"] or 0, 4)) for r in rows]

    def same(value: Any) -> Any:
        return [value]

    base, single = t["lineage_base"], t["single_title"]
    cases += [
        ("token_usage_by_model()", "", db.token_usage_by_model, plain.token_usage_by_model, usage),
        (
            "top_sessions_by_tokens(10)",
            "",
            lambda: db.top_sessions_by_tokens(10),
            lambda: plain.top_sessions_by_tokens(10),
            _ids,
        ),
        ("message_count()", "", db.message_count, plain.message_count, same),
        (
            "resolve_session_by_title",
            "largest lineage",
            lambda: db.resolve_session_by_title(base),
            lambda: plain.resolve_session_by_title(base),
            same,
        ),
        (
            "resolve_session_by_title",
            "one title",
            lambda: db.resolve_session_by_title(single),
            lambda: plain.resolve_session_by_title(single),
            same,
        ),
        (
            "get_next_title_in_lineage",
            "largest lineage",
            lambda: db.get_next_title_in_lineage(base),
            lambda: plain.get_next_title_in_lineage(base),
            same,
        ),
        (
            "get_ancestors",
            f"depth {t['depth']}",
            lambda: db.get_ancestors(t["deepest_tip"]),
            lambda: plain.get_ancestors(t["deepest_tip"]),
            _ids,
        ),
        (
            "get_descendants",
            "deepest chain",
            lambda: db.get_descendants(t["deepest_root"]),
            lambda: plain.get_descendants(t["deepest_root"]),
            lambda rows: sorted(_ids(rows)),
        ),
    ]
    rows = []
    for label, variant, store_call, plain_call, key in cases:
        row = Row("listing", label, variant, LISTING_TARGET_S, "median")
        store_result, plain_result = interleave(row, store_call, plain_call, reps)
        if isinstance(store_result, list):
            row.store_hits, row.plain_hits = len(store_result), len(plain_result)
        row.agreement = agreement(key(store_result), key(plain_result))
        log(
            f"    {label.strip()} {variant}: store {row.median('store') * 1e3:.2f} ms, "
            f"plain {row.median('plain') * 1e3:.2f} ms"
        )
        rows.append(row)
    return rows
