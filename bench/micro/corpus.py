"""Fixed, seeded test data: a template database and bulk-loaded message corpora.

Every file starts as a copy of one template made by the store itself
(``SessionDB(path).close()``), so the schema under test is exactly the one
``hermes_store`` migrates to, and both implementations work on byte-identical
starting files. Corpora are loaded with plain ``sqlite3.executemany`` in one
transaction (the FTS triggers fire as usual), which takes seconds instead of
the minutes 100,000 facade calls would take.
"""

from __future__ import annotations

import bisect
import json
import random
import shutil
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.totals import MESSAGE_TOTAL_TABLE, fill_totals
from hermes_store.schema.totals import TABLES as TOTALS_TABLES
from hermes_store.schema.totals import TRIGGERS as TOTALS_TRIGGERS

# About 300 words of the kind an agent conversation is made of. The order is
# the frequency rank (Zipf-like weights below); the query words of
# SEARCH_QUERIES sit at chosen ranks so each query has a known breadth.
_WORD_TEXT = """
the to a of and in is it you that for on this with be can i not are we have or as if at
file will but use from run by so do test an error code my what which should there all
command need was one when add then line just output function new value set check here
more out its build config like now want how also get make see into some your path
version time change fix first python only data each has default first list any module
other our package return after server update would work same log import call step next
because where local using docker script import changes message before class type way
state since test cache user could field object string both start try read write open
close result query index table column row schema session store engine commit branch
merge release tag review patch diff repository remote origin push pull fetch deploy
deployment cluster node service container image volume network port host proxy request
response header status timeout retry latency memory disk thread process signal queue
worker task job schedule cron backup restore migrate migration upgrade downgrade install
uninstall dependency requirement lock unlock token secret key certificate permission
owner group mode socket kernel driver compiler linker binary library symbol debug trace
profile benchmark metric counter gauge histogram alert dashboard graph chart report
summary detail context prompt reply answer question reason plan goal idea problem
solution workaround bug feature issue ticket sprint deadline estimate rust golang
javascript typescript kotlin swift haskell erlang elixir clojure postgres mysql sqlite
redis kafka rabbitmq nginx apache caddy traefik envoy terraform ansible puppet chef helm
kubectl minikube podman buildah skopeo vacuum checkpoint journal snapshot replica shard
partition compaction tombstone
"""
# Remove duplicates but keep the first position (the rank).
WORDS = list(dict.fromkeys(_WORD_TEXT.split()))
_WEIGHTS = [1.0 / (rank + 1) ** 1.07 for rank in range(len(WORDS))]
_CUM_WEIGHTS = list(accumulate(_WEIGHTS))

# Queries as a person types them; broad to narrow, with the FTS5 syntax the
# document lists (words, a phrase, OR, NOT, prefix).
SEARCH_QUERIES = (
    "docker deployment",
    "migration error",
    '"build failed"',
    "postgres OR sqlite",
    "timeout NOT retry",
    "checkpoint*",
    "kafka",
)

TOOL_NAMES = ("terminal", "read_file", "write_file", "search_files", "web_search", "patch")
MODELS = ("anthropic/claude-sonnet-4.6", "openai/gpt-5", "google/gemini-2.5-pro")
SOURCES = ("cli", "telegram", "discord", "slack")


def _sentence(rng: random.Random, words: int) -> str:
    """``words`` words drawn by frequency, capitalised and punctuated like prose."""
    total = _CUM_WEIGHTS[-1]
    picks = [WORDS[bisect.bisect(_CUM_WEIGHTS, rng.random() * total)] for _ in range(words)]
    # A phrase that one query looks for, at a realistic (rare) rate.
    if words > 6 and rng.random() < 0.02:
        at = rng.randrange(words - 2)
        picks[at : at + 2] = ["build", "failed"]
    picks[0] = picks[0].capitalize()
    for index in range(1, words - 1):
        if rng.random() < 0.06:
            picks[index] += ","
    return " ".join(picks) + rng.choice(".....?!:")


_POOL: list[tuple[str, int]] = []


def _pool() -> list[tuple[str, int]]:
    """4,000 seeded sentences of 3-16 words; texts are drawn from them (fast, varied)."""
    if not _POOL:
        rng = random.Random(4242)
        for _ in range(4000):
            words = rng.randint(3, 16)
            _POOL.append((_sentence(rng, words), words))
    return _POOL


def sentence(rng: random.Random, words: int) -> str:
    """Prose of about ``words`` words (at least one sentence)."""
    pool = _pool()
    parts = []
    count = 0
    while count < words:
        text, n = pool[int(rng.random() * len(pool))]
        parts.append(text)
        count += n
    return " ".join(parts)


@dataclass
class CorpusSpec:
    """How many messages, in which sessions."""

    total_messages: int
    long_session_messages: int
    seed: int = 20260416
    long_session_id: str = "sess_long"
    session_ids: list[str] = field(default_factory=list)


def _message_rows(
    rng: random.Random, session_id: str, count: int, t0: float
) -> list[tuple[object, ...]]:
    """One session's messages: user, assistant with tool calls, tool output, answer, ..."""
    rows = []
    t = t0
    call_no = 0
    for index in range(count):
        t += rng.uniform(0.5, 30.0)
        phase = index % 4
        tool_calls = tool_call_id = tool_name = finish = reasoning = None
        token_count = None
        if phase == 0:
            role, content = "user", sentence(rng, rng.randint(4, 40))
        elif phase == 1:
            role, content = "assistant", sentence(rng, rng.randint(5, 40))
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2))):
                call_no += 1
                name = rng.choice(TOOL_NAMES)
                arguments = json.dumps({"command": sentence(rng, rng.randint(2, 8))})
                calls.append(
                    {
                        "id": f"call_{call_no}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                )
            tool_calls = json.dumps(calls)
            token_count = rng.randint(20, 400)
            finish = "tool_calls"
            if rng.random() < 0.3:
                reasoning = sentence(rng, rng.randint(10, 60))
        elif phase == 2:
            role, content = "tool", sentence(rng, rng.randint(5, 300))
            tool_call_id = f"call_{call_no}"
            tool_name = rng.choice(TOOL_NAMES)
        else:
            role, content = "assistant", sentence(rng, rng.randint(10, 150))
            token_count = rng.randint(50, 1200)
            finish = "stop"
        rows.append(
            (
                session_id,
                role,
                content,
                tool_call_id,
                tool_calls,
                tool_name,
                t,
                token_count,
                finish,
                reasoning,
                None,
                None,
            )
        )
    return rows


_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, "
    "timestamp, token_count, finish_reason, reasoning, reasoning_details, codex_reasoning_items) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_HAS_TOTALS = f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{MESSAGE_TOTAL_TABLE}'"
_INSERT_SESSION = (
    "INSERT INTO sessions (id, source, model, started_at, ended_at, end_reason, "
    "message_count, tool_call_count, input_tokens, output_tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def make_template(path: Path) -> Path:
    """An empty current database, made by the store under test."""
    from hermes_store import SessionDB

    SessionDB(path).close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def make_old_schema_template(template: Path, path: Path) -> Path:
    """The template as the old store would have it: schema version 6, no trigram index.

    Drops every FTS table over ``messages`` but ``messages_fts`` (and the
    triggers that feed them). For the informational old-schema row only.
    """
    fresh_copy(template, path)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        extra = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND sql LIKE 'CREATE VIRTUAL TABLE%' AND name != 'messages_fts'"
            )
        ]
        for name in extra:
            triggers = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE ?",
                (f"%INSERT INTO {name}%",),
            ).fetchall()
            for (trigger,) in triggers:
                connection.execute(f'DROP TRIGGER "{trigger}"')
            connection.execute(f'DROP TABLE "{name}"')
        for trigger in TOTALS_TRIGGERS:  # revision 0011's kept totals: not the old store's
            connection.execute(f'DROP TRIGGER IF EXISTS "{trigger}"')
        for table in TOTALS_TABLES:
            connection.execute(f'DROP TABLE IF EXISTS "{table}"')
        connection.execute("UPDATE schema_version SET version = 6")
        connection.execute("VACUUM")
    finally:
        connection.close()
    return path


def fresh_copy(template: Path, path: Path) -> Path:
    """A byte-identical copy of ``template`` (mode kept: the store wants 0600)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy2(template, path)
    return path


def build_corpus(template: Path, path: Path, spec: CorpusSpec) -> CorpusSpec:
    """Copy the template and bulk-load ``spec.total_messages`` messages into it."""
    fresh_copy(template, path)
    rng = random.Random(spec.seed)
    sizes = [spec.long_session_messages]
    remaining = spec.total_messages - spec.long_session_messages
    while remaining > 0:
        size = min(remaining, rng.randint(8, 200))
        sizes.append(size)
        remaining -= size
    t0 = 1_760_000_000.0
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        # Index-maintenance triggers off during the load, every FTS index rebuilt
        # afterwards and the triggers recreated from their own stored SQL: the
        # schema ends up exactly as the store made it, 3-5x faster than row by row.
        insert_triggers = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'messages' AND sql LIKE '%AFTER INSERT ON messages%'"
        ).fetchall()
        fts_tables = [
            name
            for name, sql in connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                "AND sql LIKE 'CREATE VIRTUAL TABLE%'"
            )
            if "fts5" in sql.lower() and "content=messages" in sql.replace(" ", "").lower()
        ]
        connection.execute("BEGIN IMMEDIATE")
        for name, _sql in insert_triggers:
            connection.execute(f'DROP TRIGGER "{name}"')
        spec.session_ids = []
        for number, size in enumerate(sizes):
            session_id = spec.long_session_id if number == 0 else f"sess_{number:05d}"
            spec.session_ids.append(session_id)
            started = t0 + number * 3600.0
            rows = _message_rows(rng, session_id, size, started)
            tool_calls = sum(len(json.loads(r[4])) for r in rows if r[4])
            connection.execute(
                _INSERT_SESSION,
                (
                    session_id,
                    SOURCES[number % len(SOURCES)],
                    MODELS[number % len(MODELS)],
                    started,
                    rows[-1][6] + 1.0,
                    "user_exit",
                    size,
                    tool_calls,
                    rng.randint(1000, 90000),
                    rng.randint(100, 9000),
                ),
            )
            connection.executemany(_INSERT_MESSAGE, rows)
        for name in fts_tables:
            connection.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'rebuild\')')
        if connection.execute(_HAS_TOTALS).fetchone() is not None:
            fill_totals(connection)  # revision 0011's count lost its insert trigger too
        for _name, sql in insert_triggers:
            connection.execute(sql)
        connection.execute("COMMIT")
        # No ANALYZE: files in the field have no sqlite_stat1 unless the store makes one.
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return spec


def corpus_facts(path: Path) -> dict[str, object]:
    """Sizes to print: messages, sessions, file size, matches per query."""
    connection = sqlite3.connect(path)
    try:
        messages = connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        sessions = connection.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        from hermes_store.domain.query_syntax import sanitize_fts5_query

        matches = {}
        for query in SEARCH_QUERIES:
            matches[query] = connection.execute(
                "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                (sanitize_fts5_query(query),),
            ).fetchone()[0]
    finally:
        connection.close()
    return {
        "messages": messages,
        "sessions": sessions,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "matches_per_query": matches,
    }


def sample_turns(count: int, seed: int = 7) -> list[list[dict[str, object]]]:
    """``count`` agent turns of 6 messages each, as keyword arguments of append_message.

    user -> assistant (tool call) -> tool -> assistant (tool call) -> tool -> assistant.
    """
    rng = random.Random(seed)
    turns = []
    call_no = 0

    def call() -> tuple[list[dict[str, object]], str]:
        nonlocal call_no
        call_no += 1
        call_id = f"call_{call_no}"
        arguments = json.dumps({"command": sentence(rng, rng.randint(2, 8))})
        name = rng.choice(TOOL_NAMES)
        return [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ], call_id

    for _ in range(count):
        turn: list[dict[str, object]] = [
            {"role": "user", "content": sentence(rng, rng.randint(4, 40))}
        ]
        for _step in range(2):
            calls, call_id = call()
            assistant: dict[str, object] = {
                "role": "assistant",
                "content": sentence(rng, rng.randint(5, 40)),
                "tool_calls": calls,
                "token_count": rng.randint(20, 400),
                "finish_reason": "tool_calls",
            }
            if rng.random() < 0.3:
                assistant["reasoning"] = sentence(rng, rng.randint(10, 60))
            turn.append(assistant)
            turn.append(
                {
                    "role": "tool",
                    "content": sentence(rng, rng.randint(5, 300)),
                    "tool_call_id": call_id,
                    "tool_name": calls[0]["function"]["name"],  # type: ignore[index]
                }
            )
        turn.append(
            {
                "role": "assistant",
                "content": sentence(rng, rng.randint(10, 150)),
                "token_count": rng.randint(50, 1200),
                "finish_reason": "stop",
            }
        )
        turns.append(turn)
    return turns
