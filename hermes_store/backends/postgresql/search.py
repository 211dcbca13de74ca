"""PostgreSQL's search statements, beside the FTS5 ones of :mod:`.search`.

Word search uses the expression GIN index ``idx_messages_fts`` (revision 0001):
every statement repeats its expression ``to_tsvector('simple',
LEFT(COALESCE(content, ''), 100000))`` verbatim, or the planner cannot use the
index. Substring search needs no statement of its own: the portable ``...
ILIKE ... ORDER BY m.id DESC`` scan of :func:`.search._match_statement` runs
unchanged, helped by the pg_trgm index ``idx_messages_content_trgm``
(revision 0007).
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import text
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.search_filters import filter_sql

# The index covers the first WORD_INDEX_CHARS characters (revision 0001: a
# tsvector cannot exceed 1 MB); the headline reads no further either, which
# also bounds its cost on a huge message.
WORD_INDEX_CHARS = 100_000
INDEXED_TEXT = f"LEFT(COALESCE(m.content, ''), {WORD_INDEX_CHARS})"
TSVECTOR = f"to_tsvector('simple', {INDEXED_TEXT})"
TSQUERY = "to_tsquery('simple', :p_query)"
# One fragment of up to 40 words around the best match, like FTS5's
# snippet(..., 40). ShortWord=0: otherwise words of up to three letters are
# dropped at the fragment's edges ("the quick" would lose "the").
HEADLINE_OPTIONS = (
    "StartSel=>>>, StopSel=<<<, MaxFragments=1, MaxWords=40, MinWords=20, ShortWord=0"
)
ELLIPSIS = "..."


@lru_cache(maxsize=64)
def word_statement(sources: bool, excluded: bool, roles: bool) -> TextClause:
    """One prebuilt word-search statement per combination of filters.

    ``:p_query`` is a :func:`hermes_store.backends.postgresql.tsquery.tsquery_text`. The page is
    chosen first from ids and ranks only (``ts_rank``, normalised by document
    length like bm25; ties newest first, so paging is stable), then
    ``ts_headline`` runs for the page's rows alone: it re-parses the content
    and is the costly part. The headline is one fragment; ``...`` is added on
    a side where the content goes on, as FTS5's snippet() does.
    """
    filters, expanding = filter_sql(sources, excluded, roles)
    sql = f"""
        SELECT m.id, m.session_id, m.role,
               CASE WHEN hl.found_at > 1 AND btrim(LEFT(hl.content, hl.found_at - 1)) <> ''
                    THEN '{ELLIPSIS}' ELSE '' END
               || hl.headline
               || CASE WHEN hl.found_at > 0
                        AND btrim(SUBSTR(hl.content, hl.found_at + LENGTH(hl.plain))) <> ''
                    THEN '{ELLIPSIS}' ELSE '' END AS snippet,
               m.timestamp, m.tool_name,
               s.source, s.model, s.started_at AS session_started
        FROM (
            SELECT m.id, ts_rank({TSVECTOR}, {TSQUERY}, 1) AS rank
            FROM messages m
            JOIN sessions s ON s.id = m.session_id
            WHERE {TSVECTOR} @@ {TSQUERY} {filters}
            ORDER BY rank DESC, m.id DESC
            LIMIT :p_limit OFFSET :p_offset
        ) AS page
        JOIN messages m ON m.id = page.id
        JOIN sessions s ON s.id = m.session_id
        CROSS JOIN LATERAL (
            SELECT marked.content, marked.headline, marked.plain,
                   POSITION(marked.plain IN marked.content) AS found_at
            FROM (
                SELECT made.content, made.headline,
                       REPLACE(REPLACE(made.headline, '>>>', ''), '<<<', '') AS plain
                FROM (
                    SELECT COALESCE(m.content, '') AS content,
                           ts_headline('simple', {INDEXED_TEXT}, {TSQUERY},
                                       '{HEADLINE_OPTIONS}') AS headline
                    OFFSET 0
                ) AS made
            ) AS marked
        ) AS hl
        ORDER BY page.rank DESC, page.id DESC
    """
    return text(sql).bindparams(*expanding)
