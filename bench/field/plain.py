"""The yardstick at field size: the old store's reads, in plain ``sqlite3``.

Search is the old design: the old sanitizer, ``messages_fts MATCH ? ORDER BY
rank LIMIT 20`` joined to messages and sessions, then one context query per
hit (the message before and after in its session, cut to 200 characters).
For CJK it does what the agent's own code does since its trigram index:
``messages_fts_trigram MATCH`` when every term has three or more characters,
else ``LIKE '%term%'`` newest first. The listings and reports are the old
class's SQL: ``SELECT s.*`` with correlated preview/last-activity subqueries
and a per-row walk to each compression tip, the documented usage queries,
the title lineage lookups with ``LIKE 'T #%'``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..micro.plain import sanitize_fts5_query

_CJK = re.compile("[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_CONTEXT = """
    WITH target AS (SELECT session_id, timestamp, id FROM messages WHERE id = ?)
    SELECT role, content FROM (
        SELECT m.id, m.timestamp, m.role, m.content FROM messages m
        JOIN target t ON t.session_id = m.session_id
        WHERE m.timestamp < t.timestamp OR (m.timestamp = t.timestamp AND m.id < t.id)
        ORDER BY m.timestamp DESC, m.id DESC LIMIT 1)
    UNION ALL
    SELECT role, content FROM messages WHERE id = ?
    UNION ALL
    SELECT role, content FROM (
        SELECT m.id, m.timestamp, m.role, m.content FROM messages m
        JOIN target t ON t.session_id = m.session_id
        WHERE m.timestamp > t.timestamp OR (m.timestamp = t.timestamp AND m.id > t.id)
        ORDER BY m.timestamp, m.id LIMIT 1)
"""
_COLUMNS = """m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name,
    s.source, s.model, s.started_at AS session_started"""
_RICH = """
    SELECT s.*,
        COALESCE(
            (SELECT SUBSTR(REPLACE(REPLACE(m.content, X'0A', ' '), X'0D', ' '), 1, 63)
             FROM messages m
             WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
             ORDER BY m.timestamp, m.id LIMIT 1),
            '') AS _preview_raw,
        COALESCE(
            (SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id),
            s.started_at) AS last_active
    FROM sessions s
"""
_TIP_FIELDS = (
    "id", "ended_at", "end_reason", "message_count", "tool_call_count", "title",
    "last_active", "preview", "model", "system_prompt",
)  # fmt: skip


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _filters(
    source_filter: Sequence[str] | None, role_filter: Sequence[str] | None
) -> tuple[str, list[str]]:
    sql, params = "", []
    if source_filter is not None:
        sql += f" AND s.source IN ({','.join('?' * len(source_filter))})"
        params += list(source_filter)
    if role_filter:
        sql += f" AND m.role IN ({','.join('?' * len(role_filter))})"
        params += list(role_filter)
    return sql, params


class PlainField:
    """One read connection on the corpus, as the old class kept one."""

    def __init__(self, path: Path) -> None:
        self._c = sqlite3.connect(str(path), check_same_thread=False, timeout=1.0,
                                  isolation_level=None)  # fmt: skip
        self._c.row_factory = sqlite3.Row
        self._c.execute("PRAGMA journal_mode=WAL")
        self._c.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        self._c.close()

    # -- search ----------------------------------------------------------
    def search_messages(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        fts = sanitize_fts5_query(query)
        if not fts:
            return []
        filters, params = _filters(source_filter, role_filter)
        if has_cjk(query):
            matches = self._substring(fts, filters, params, limit)
        else:
            sql = f"""SELECT {_COLUMNS.format(snippet="snippet(messages_fts, 0, '>>>', '<<<', '...', 40)")}
                FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                JOIN sessions s ON s.id = m.session_id
                WHERE messages_fts MATCH ?{filters} ORDER BY rank LIMIT ?"""  # noqa: E501
            try:
                matches = [dict(r) for r in self._c.execute(sql, [fts, *params, limit])]
            except sqlite3.OperationalError:
                return []
        for match in matches:
            rows = self._c.execute(_CONTEXT, (match["id"], match["id"])).fetchall()
            match["context"] = [
                {"role": r["role"], "content": (r["content"] or "")[:200]} for r in rows
            ]
        return matches

    def _substring(
        self, fts: str, filters: str, params: list[str], limit: int
    ) -> list[dict[str, Any]]:
        terms = [t.strip('"') for t in fts.split() if t.upper() not in ("AND", "OR", "NOT")]
        if all(len(t) >= 3 for t in terms):
            match = " ".join(f'"{t}"' for t in terms)
            snippet = "snippet(messages_fts_trigram, 0, '>>>', '<<<', '...', 40)"
            sql = f"""SELECT {_COLUMNS.format(snippet=snippet)}
                FROM messages_fts_trigram JOIN messages m ON m.id = messages_fts_trigram.rowid
                JOIN sessions s ON s.id = m.session_id
                WHERE messages_fts_trigram MATCH ?{filters} ORDER BY rank LIMIT ?"""
            return [dict(r) for r in self._c.execute(sql, [match, *params, limit])]
        likes = " AND ".join("m.content LIKE ? ESCAPE '\\'" for _ in terms)
        snippet = "substr(m.content, max(1, instr(m.content, ?) - 40), 120)"
        sql = f"""SELECT {_COLUMNS.format(snippet=snippet)}
            FROM messages m JOIN sessions s ON s.id = m.session_id
            WHERE {likes}{filters} ORDER BY m.timestamp DESC LIMIT ?"""
        args = [terms[0], *(f"%{_escape_like(t)}%" for t in terms), *params, limit]
        return [dict(r) for r in self._c.execute(sql, args)]

    def count_matches(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
    ) -> int:
        """How many messages the query matches in all (the size of what gets ranked)."""
        fts = sanitize_fts5_query(query)
        filters, params = _filters(source_filter, role_filter)
        if not has_cjk(query):
            table, match = "messages_fts", fts
        else:
            terms = [t.strip('"') for t in fts.split()]
            if not all(len(t) >= 3 for t in terms):
                likes = " AND ".join("m.content LIKE ? ESCAPE '\\'" for _ in terms)
                sql = f"""SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id
                    WHERE {likes}{filters}"""
                args = [*(f"%{_escape_like(t)}%" for t in terms), *params]
                return int(self._c.execute(sql, args).fetchone()[0])
            table, match = "messages_fts_trigram", " ".join(f'"{t}"' for t in terms)
        sql = f"""SELECT COUNT(*) FROM {table} JOIN messages m ON m.id = {table}.rowid
            JOIN sessions s ON s.id = m.session_id WHERE {table} MATCH ?{filters}"""
        return int(self._c.execute(sql, [match, *params]).fetchone()[0])

    # -- listings and reports ---------------------------------------------
    def list_sessions_rich(
        self,
        source: str | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
    ) -> list[dict[str, Any]]:
        where, params = [], []
        if not include_children:
            where.append("s.parent_session_id IS NULL")
        if source:
            where.append("s.source = ?")
            params.append(source)
        sql = _RICH + (f"WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY s.started_at DESC LIMIT ? OFFSET ?"
        rows = [self._rich(r) for r in self._c.execute(sql, [*params, limit, offset])]
        if include_children:
            return rows
        listed = []
        for row in rows:
            tip = (
                self.get_compression_tip(row["id"]) if row["end_reason"] == "compression" else None
            )
            tip_row = self._rich_row(tip) if tip and tip != row["id"] else None
            if tip_row is None:
                listed.append(row)
                continue
            merged = {**row, **{k: tip_row[k] for k in _TIP_FIELDS}}
            merged["_lineage_root_id"] = row["id"]
            listed.append(merged)
        return listed

    @staticmethod
    def _rich(row: sqlite3.Row) -> dict[str, Any]:
        listed = dict(row)
        raw = listed.pop("_preview_raw", "").strip()
        listed["preview"] = raw[:60] + ("..." if len(raw) > 60 else "") if raw else ""
        return listed

    def _rich_row(self, session_id: str) -> dict[str, Any] | None:
        row = self._c.execute(_RICH + "WHERE s.id = ?", (session_id,)).fetchone()
        return self._rich(row) if row else None

    def get_compression_tip(self, session_id: str) -> str:
        current = session_id
        for _ in range(100):
            row = self._c.execute(
                "SELECT id FROM sessions WHERE parent_session_id = ? AND started_at >= ("
                "SELECT ended_at FROM sessions WHERE id = ? AND end_reason = 'compression') "
                "ORDER BY started_at DESC LIMIT 1",
                (current, current),
            ).fetchone()
            if row is None:
                return current
            current = row["id"]
        return current

    def token_usage_by_model(self) -> list[dict[str, Any]]:
        sql = """SELECT model, COUNT(*) as session_count, SUM(input_tokens) as total_input,
                   SUM(output_tokens) as total_output, SUM(estimated_cost_usd) as total_cost
            FROM sessions WHERE model IS NOT NULL GROUP BY model ORDER BY total_cost DESC"""
        return [dict(r) for r in self._c.execute(sql)]

    def top_sessions_by_tokens(self, limit: int = 10) -> list[dict[str, Any]]:
        sql = """SELECT id, title, model, input_tokens + output_tokens AS total_tokens,
                   estimated_cost_usd FROM sessions ORDER BY total_tokens DESC LIMIT ?"""
        return [dict(r) for r in self._c.execute(sql, (limit,))]

    def message_count(self) -> int:
        return int(self._c.execute("SELECT COUNT(*) FROM messages").fetchone()[0])

    def resolve_session_by_title(self, title: str) -> str | None:
        exact = self._c.execute("SELECT * FROM sessions WHERE title = ?", (title,)).fetchone()
        numbered = self._c.execute(
            "SELECT id, title, started_at FROM sessions "
            "WHERE title LIKE ? ESCAPE '\\' ORDER BY started_at DESC",
            (f"{_escape_like(title)} #%",),
        ).fetchall()
        if numbered:
            return str(numbered[0]["id"])
        return str(exact["id"]) if exact else None

    def get_next_title_in_lineage(self, base_title: str) -> str:
        found = re.match(r"^(.*?) #(\d+)$", base_title)
        base = found.group(1) if found else base_title
        existing = [
            row["title"]
            for row in self._c.execute(
                "SELECT title FROM sessions WHERE title = ? OR title LIKE ? ESCAPE '\\'",
                (base, f"{_escape_like(base)} #%"),
            )
        ]
        if not existing:
            return base
        highest = 1
        for title in existing:
            numbered = re.match(r"^.* #(\d+)$", title)
            if numbered:
                highest = max(highest, int(numbered.group(1)))
        return f"{base} #{highest + 1}"

    def _lineage(self, sql: str, session_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._c.execute(sql, (session_id,))]

    def get_ancestors(self, session_id: str) -> list[dict[str, Any]]:
        return self._lineage(
            """WITH RECURSIVE lineage AS (
                SELECT * FROM sessions WHERE id = ?
                UNION SELECT s.* FROM sessions s JOIN lineage l ON s.id = l.parent_session_id)
            SELECT id, title, started_at, parent_session_id FROM lineage""",
            session_id,
        )

    def get_descendants(self, session_id: str) -> list[dict[str, Any]]:
        return self._lineage(
            """WITH RECURSIVE descendants AS (
                SELECT * FROM sessions WHERE id = ?
                UNION SELECT s.* FROM sessions s JOIN descendants d ON s.parent_session_id = d.id)
            SELECT id, title, started_at, parent_session_id FROM descendants""",
            session_id,
        )
