"""The field-size state.db: built once by bulk insert, kept, and checked.

``python -m bench.field.corpus [--small] [--rebuild]`` builds (or finds) the
corpus and prints its facts. The file starts as ``SessionDB(path)`` makes it,
so its schema is exactly hermes_store's head; the rows then go in with plain
``sqlite3`` in one transaction with the FTS insert triggers dropped, each FTS
index is rebuilt once at the end and the triggers are recreated from their
own stored SQL (minutes instead of hours of trigger-by-trigger indexing).
The result is verified -- same ``sqlite_master`` as a fresh store file, FTS5
``integrity-check`` with ``rank = 1`` on every index (index and content
agree), counters equal to the rows -- before it is renamed into place under
``bench/.work/field/``, keyed by its parameters, the generator's version and
a hash of the schema, so a schema change (the restructure under way) builds
a new one instead of measuring a stale file. Messages of concurrent sessions
interleave by timestamp, as in a file that several processes write.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..paths import WORK_ROOT
from . import text as field_text
from .messages import MESSAGE_COLUMNS, SESSION_COLUMNS, MessageRow, session_rows
from .plan import T_END, SessionPlan, plan_sessions

GENERATOR_VERSION = 1
"""Bump when the generated rows change: cached corpora of older versions are rebuilt."""
WORK = WORK_ROOT / "field"
RARE_WORD = "zephyrquill"
RARE_COUNT = 12
"""The rare word is written into exactly this many messages (fewer than a page of hits)."""
BATCH = 5_000


@dataclass(frozen=True)
class FieldSpec:
    messages: int
    sessions: int
    seed: int = 20_261_203

    @property
    def key(self) -> str:
        return f"field-{self.messages}m-{self.sessions}s-seed{self.seed}-g{GENERATOR_VERSION}"


FULL = FieldSpec(1_000_000, 50_000)
SMALL = FieldSpec(100_000, 5_000)

Log = Callable[[str], None]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------
# the schema the store makes
# ----------------------------------------------------------------------
def make_template(path: Path) -> Path:
    """An empty head-schema file, made by the store under test itself."""
    from hermes_store import SessionDB

    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    SessionDB(path).close()
    return path


def schema_of(path: Path) -> list[tuple[str, str, str, str | None]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(
            connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
            key=lambda row: (row[0], row[1]),
        )
    finally:
        connection.close()


def schema_hash(path: Path) -> str:
    return hashlib.sha256(repr(schema_of(path)).encode()).hexdigest()[:10]


def fts_tables(connection: sqlite3.Connection) -> list[str]:
    """The FTS5 indexes over ``messages`` (external content: rebuilt with 'rebuild')."""
    return [
        name
        for name, sql in connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
        )
        if "fts5" in sql.lower() and "content=messages" in sql.replace(" ", "").lower()
    ]


# ----------------------------------------------------------------------
# build
# ----------------------------------------------------------------------
def _interleaved(plans: list[SessionPlan], stats: Counter[str]) -> Any:
    """Yield ("session", row) and ("message", row) in time order across all sessions.

    A session's row comes when its first message is due (its parent's row is
    always earlier: children start after their parents). Only the sessions
    running at a moment are held in memory.
    """
    heap: list[tuple[float, int, int, list[MessageRow]]] = []
    for seq, plan in enumerate(plans):
        while heap and heap[0][0] <= plan.started_at:
            yield from _pop(heap)
        rows = session_rows(plan)
        stats["tool_calls"] += rows.tool_calls
        stats["cjk_messages"] += rows.cjk_messages
        yield "session", rows.session
        heapq.heappush(heap, (rows.messages[0][6], seq, 0, rows.messages))
    while heap:
        yield from _pop(heap)


def _pop(heap: list[tuple[float, int, int, list[MessageRow]]]) -> Any:
    _at, seq, index, rows = heapq.heappop(heap)
    yield "message", rows[index]
    if index + 1 < len(rows):
        heapq.heappush(heap, (rows[index + 1][6], seq, index + 1, rows))


def build(spec: FieldSpec, template: Path, path: Path, log: Log = _log) -> dict[str, Any]:
    """Write the corpus of ``spec`` to ``path`` (a copy of ``template``); returns its facts."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(template.read_bytes())
    os.chmod(path, 0o600)
    started = time.perf_counter()
    plans = plan_sessions(spec.sessions, spec.messages, spec.seed)
    needles = set(random.Random(spec.seed + 1).sample(range(spec.messages), RARE_COUNT))
    stats: Counter[str] = Counter()
    connection = sqlite3.connect(path, isolation_level=None)
    timings: dict[str, float] = {}
    try:
        # No other connection exists: the load needs neither WAL nor a durable journal.
        connection.execute("PRAGMA journal_mode=MEMORY")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("PRAGMA cache_size=-1000000")
        triggers = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'messages' AND sql LIKE '%AFTER INSERT ON messages%'"
        ).fetchall()
        indexes = fts_tables(connection)
        connection.execute("BEGIN IMMEDIATE")
        for name, _sql in triggers:
            connection.execute(f'DROP TRIGGER "{name}"')
        insert_session = (
            f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(SESSION_COLUMNS))})"
        )
        insert_message = (
            f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(MESSAGE_COLUMNS))})"
        )
        sessions: list[tuple[object, ...]] = []
        messages: list[MessageRow] = []
        owed = 0
        for kind, row in _interleaved(plans, stats):
            if kind == "session":
                sessions.append(row)
                continue
            if stats["messages"] in needles:
                owed += 1
            if owed and row[2]:  # the rare word goes into the next message with text
                row = (*row[:2], f"{row[2]} (see {RARE_WORD})", *row[3:])  # type: ignore[assignment]
                owed -= 1
                stats["rare_written"] += 1
            stats["messages"] += 1
            stats[f"role_{row[1]}"] += 1
            stats["content_chars"] += len(row[2] or "")
            stats["tool_calls_rows"] += row[4] is not None
            messages.append(row)
            if len(messages) >= BATCH:
                connection.executemany(insert_session, sessions)
                connection.executemany(insert_message, messages)
                sessions.clear()
                messages.clear()
                if stats["messages"] % 100_000 == 0:
                    log(
                        f"    {stats['messages']:,} messages ({time.perf_counter() - started:.0f}s)"
                    )
        connection.executemany(insert_session, sessions)
        connection.executemany(insert_message, messages)
        timings["rows_s"] = time.perf_counter() - started
        for name in indexes:
            t = time.perf_counter()
            connection.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'rebuild\')')
            timings[f"rebuild_{name}_s"] = time.perf_counter() - t
            log(f"    rebuilt {name} in {timings[f'rebuild_{name}_s']:.0f}s")
        if "messages_cjk_bigrams" in {
            r[0] for r in connection.execute("SELECT name FROM sqlite_master")
        }:
            from hermes_store.schema.bigram_index import fill_bigrams

            t = time.perf_counter()
            fill_bigrams(connection)
            timings["fill_messages_cjk_bigrams_s"] = time.perf_counter() - t
        if "message_total" in {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}:
            from hermes_store.schema.totals import fill_totals

            fill_totals(connection)  # revision 0011's count lost its insert trigger for the load
        for _name, sql in triggers:
            connection.execute(sql)
        connection.execute("COMMIT")
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()
    timings["build_s"] = time.perf_counter() - started
    return _facts(spec, path, plans, stats, timings)


def _facts(
    spec: FieldSpec,
    path: Path,
    plans: list[SessionPlan],
    stats: Counter[str],
    timings: dict[str, float],
) -> dict[str, Any]:
    kinds = Counter(p.kind for p in plans)
    lineages = Counter(p.title.split(" #")[0] for p in plans if p.title and " #" in p.title)
    biggest, biggest_size = lineages.most_common(1)[0] if lineages else (None, 0)
    messages = stats["messages"]
    return {
        "spec": asdict(spec),
        "key": spec.key,
        "file_bytes": path.stat().st_size,
        "messages": messages,
        "sessions": len(plans),
        "sessions_by_kind": dict(kinds),
        "sessions_by_source": dict(Counter(p.source for p in plans)),
        "sessions_by_lang": dict(Counter(p.lang for p in plans)),
        "open_sessions": sum(1 for p in plans if p.ended_at is None),
        "titled_sessions": sum(1 for p in plans if p.title),
        "compression_chains": sum(1 for p in plans if p.chain),
        "largest_title_lineage": {"base": biggest, "sessions": biggest_size + 1},
        "longest_session_messages": max(p.messages for p in plans),
        "messages_by_role": {k[5:]: v for k, v in stats.items() if k.startswith("role_")},
        "tool_calls_rows": stats["tool_calls_rows"],
        "tool_calls": stats["tool_calls"],
        "cjk_messages": stats["cjk_messages"],
        "cjk_share": round(stats["cjk_messages"] / messages, 4),
        "tool_row_share": round(stats["role_tool"] / messages, 4),
        "content_mb": round(stats["content_chars"] / 1e6, 1),
        "mean_content_chars": round(stats["content_chars"] / messages),
        "rare_word": RARE_WORD,
        "rare_word_messages": stats["rare_written"],
        "vocabulary": {
            "latin_words": len(field_text.VOCABULARY),
            "chinese_words": len(field_text.ZH_VOCABULARY),
            "identifiers": len(field_text.IDENTIFIERS),
            "paths": len(field_text.PATHS),
        },
        "days": round(
            (max(p.started_at for p in plans) - min(p.started_at for p in plans)) / 86400
        ),
        "now": T_END,
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "sqlite": sqlite3.sqlite_version,
    }


# ----------------------------------------------------------------------
# verification
# ----------------------------------------------------------------------
def verify(path: Path, template: Path) -> list[str]:
    """What is wrong with the built file (an empty list: nothing)."""
    problems = []
    if schema_of(path) != schema_of(template):
        problems.append("sqlite_master differs from a fresh store file")
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for name in fts_tables(connection):
            try:
                connection.execute(
                    f'INSERT INTO "{name}"("{name}", rank) VALUES (\'integrity-check\', 1)'
                )
            except sqlite3.DatabaseError as error:
                problems.append(f"{name}: integrity-check failed: {error}")
        miscounted = connection.execute(
            "SELECT COUNT(*) FROM sessions s WHERE message_count != "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) "
            "OR tool_call_count != (SELECT COALESCE(SUM(json_array_length(m.tool_calls)), 0) "
            "FROM messages m WHERE m.session_id = s.id)"
        ).fetchone()[0]
        if miscounted:
            problems.append(f"{miscounted} sessions with wrong counters")
        problems += _bigram_problems(connection)
        problems += _totals_problems(connection)
        orphans = connection.execute("PRAGMA foreign_key_check").fetchall()
        if orphans:
            problems.append(f"{len(orphans)} rows fail the foreign key check")
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            problems.append(f"journal mode is {mode}, not wal")
    finally:
        connection.close()
    return problems


def _bigram_problems(connection: sqlite3.Connection) -> list[str]:
    """The CJK pair index (revision 0009) holds exactly the pairs of every message."""
    from hermes_store.domain.bigrams import grams

    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if "messages_cjk_bigrams" not in tables:
        return []
    expected = sum(
        len(grams(text))
        for (text,) in connection.execute(
            "SELECT content FROM messages WHERE length(CAST(content AS BLOB)) > length(content)"
        )
    )
    held = connection.execute("SELECT COUNT(*) FROM messages_cjk_bigrams").fetchone()[0]
    orphans = connection.execute(
        "SELECT COUNT(*) FROM messages_cjk_bigrams "
        "WHERE message_id NOT IN (SELECT id FROM messages)"
    ).fetchone()[0]
    if held != expected or orphans:
        return [f"messages_cjk_bigrams holds {held} pairs ({orphans} orphans), expected {expected}"]
    return []


def _totals_problems(connection: sqlite3.Connection) -> list[str]:
    """Revision 0011's kept totals agree with the tables (where the file has them)."""
    from hermes_store.schema.totals import MESSAGE_TOTAL_TABLE, totals_problems

    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    return totals_problems(connection) if MESSAGE_TOTAL_TABLE in tables else []


# ----------------------------------------------------------------------
# the cache
# ----------------------------------------------------------------------
def ensure(
    spec: FieldSpec, *, rebuild: bool = False, log: Log = _log
) -> tuple[Path, dict[str, Any]]:
    """The verified corpus of ``spec`` and its facts, built first if it is not there yet."""
    WORK.mkdir(parents=True, exist_ok=True)
    template = make_template(WORK / f"template-{os.getpid()}.db")
    try:
        name = f"{spec.key}-{schema_hash(template)}"
        path, facts_path = WORK / f"{name}.db", WORK / f"{name}.json"
        if path.exists() and facts_path.exists() and not rebuild:
            return path, json.loads(facts_path.read_text(encoding="utf-8"))
        older = None if rebuild else _older_corpus(spec, name)
        if older is not None:
            return _derive(older, path, facts_path, template, log)
        for stale in WORK.glob(f"field-{spec.messages}m-{spec.sessions}s-*"):
            if stale.name.startswith(name) and not rebuild:
                continue
            log(f"  removing stale corpus file {stale.name}")
            stale.unlink()
        partial = WORK / f"{name}.partial.db"
        log(f"  building {spec.messages:,} messages in {spec.sessions:,} sessions -> {path.name}")
        facts = build(spec, template, partial, log)
        t = time.perf_counter()
        problems = verify(partial, template)
        facts["timings_s"]["verify_s"] = round(time.perf_counter() - t, 1)
        if problems:
            raise RuntimeError("the built corpus is wrong: " + "; ".join(problems))
        facts["verified"] = ["schema", "fts integrity-check rank=1", "counters", "foreign keys"]
        facts["schema_hash"] = name.rsplit("-", 1)[1]
        partial.rename(path)
        facts_path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
        timings = facts["timings_s"]
        log(f"  built in {timings['build_s']}s, verified in {timings['verify_s']}s")
        return path, facts
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{template}{suffix}").unlink(missing_ok=True)


def _older_corpus(spec: FieldSpec, name: str) -> Path | None:
    """A kept, verified corpus of the same rows built under an earlier schema of ours."""
    for candidate in sorted(WORK.glob(f"{spec.key}-*.db")):
        if candidate.stem == name or candidate.stem.endswith(".partial"):
            continue
        if candidate.with_suffix(".json").exists() and _revision(candidate) is not None:
            return candidate
    return None


def _revision(path: Path) -> str | None:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        connection.close()
    return None if row is None else str(row[0])


def _derive(
    older: Path, path: Path, facts_path: Path, template: Path, log: Log
) -> tuple[Path, dict[str, Any]]:
    """The corpus under the current schema: a copy of ``older`` upgraded by the store itself.

    The rows do not depend on the schema (the generator is unchanged), so a
    schema change need not cost a rebuild: the older file is copied (never
    written: other checkouts may share it by hard link) and ``SessionDB``
    runs the new revisions on the copy, as it would on a user's file. The
    copy is then verified like a built corpus.
    """
    from hermes_store import SessionDB

    partial = path.with_name(f"{path.stem}.partial.db")
    log(f"  deriving {path.name} from {older.name} (copy, then the store's own upgrade)")
    t = time.perf_counter()
    shutil.copyfile(older, partial)
    os.chmod(partial, 0o600)
    copy_s = time.perf_counter() - t
    t = time.perf_counter()
    SessionDB(partial).close()
    upgrade_s = time.perf_counter() - t
    t = time.perf_counter()
    problems = verify(partial, template)
    verify_s = time.perf_counter() - t
    if problems:
        raise RuntimeError("the upgraded corpus is wrong: " + "; ".join(problems))
    facts = json.loads(older.with_suffix(".json").read_text(encoding="utf-8"))
    facts["derived_from"] = {
        "file": older.name,
        "revision": _revision(older),
        "copy_s": round(copy_s, 1),
        "upgrade_s": round(upgrade_s, 1),
        "verify_s": round(verify_s, 1),
    }
    facts["schema_hash"] = path.stem.rsplit("-", 1)[1]
    facts["file_bytes"] = partial.stat().st_size
    for suffix in ("-wal", "-shm"):
        Path(f"{partial}{suffix}").unlink(missing_ok=True)
    partial.rename(path)
    facts_path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    log(f"  copied in {copy_s:.0f}s, upgraded in {upgrade_s:.0f}s, verified in {verify_s:.0f}s")
    return path, facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.field.corpus", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--small", action="store_true", help=f"{SMALL.messages:,} messages")
    parser.add_argument("--messages", type=int, help="another size (with --sessions)")
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--seed", type=int, default=FULL.seed)
    parser.add_argument(
        "--rebuild", action="store_true", help="build even if a verified file exists"
    )
    args = parser.parse_args(argv)
    spec = SMALL if args.small else FULL
    if args.messages or args.sessions:
        spec = FieldSpec(args.messages or spec.messages, args.sessions or spec.sessions, args.seed)
    elif args.seed != spec.seed:
        spec = FieldSpec(spec.messages, spec.sessions, args.seed)
    path, facts = ensure(spec, rebuild=args.rebuild)
    print(path)
    print(json.dumps(facts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
