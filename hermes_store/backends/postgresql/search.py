"""PostgreSQL's search statements, beside the FTS5 ones of :mod:`.search`.

Word search reads the stored vector ``messages.content_tsv`` and its GIN
index ``idx_messages_fts`` (revision 0014; see :mod:`.word_index`): a match,
its rank and a phrase's positions come from the stored vector, never from
re-parsing the text. The matches are ranked within windows of the newest
ones, as on SQLite (``RANK_WINDOW`` in :mod:`hermes_store.repositories.search`):
:func:`nth_newest_statement` finds a window's oldest id, walking the primary
key newest first for a common query (each step a test of a stored vector;
K matches are found after about K / share rows) or reading the GIN index for
a rare one, whichever the planner's lexeme statistics say is cheaper.
Substring search needs no statement of its own: the portable ``... ILIKE
... ORDER BY m.id DESC`` scan of :func:`hermes_store.backends.sqlite.search.match_statement` runs
unchanged, helped by the pg_trgm index ``idx_messages_content_trgm``
(revision 0007).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.layout import WORD_INDEX as STORE_WORD_INDEX
from hermes_store.backends.postgresql.cjk_pairs import TABLE_NAME as PAIR_TABLE
from hermes_store.backends.postgresql.plans import CUSTOM_PLAN
from hermes_store.backends.postgresql.tsquery import tsquery_text
from hermes_store.backends.postgresql.word_index import VECTOR_COLUMN, WORD_INDEX_CHARS, cut_text
from hermes_store.backends.search_filters import filter_sql
from hermes_store.backends.sqlite.search import match_statement
from hermes_store.domain.substrings import TRIGRAM

# The headline reads no further than the vector covers, which also bounds
# its cost on a huge message.
INDEXED_TEXT = f"LEFT(COALESCE(m.content, ''), {WORD_INDEX_CHARS})"
TSVECTOR = f"m.{VECTOR_COLUMN}"
TSQUERY = "to_tsquery('simple', :p_query)"
# One fragment of up to 40 words around the best match, like FTS5's
# snippet(..., 40). ShortWord=0: otherwise words of up to three letters are
# dropped at the fragment's edges ("the quick" would lose "the").
HEADLINE_OPTIONS = (
    "StartSel=>>>, StopSel=<<<, MaxFragments=1, MaxWords=40, MinWords=20, ShortWord=0"
)
ELLIPSIS = "..."
EDGE_CHARS = 40
"""Text before or after a snippet is shown as written up to this long, else ``...``.

Punctuation alone, and words the headline left out: PostgreSQL's fragment
drops a number at its edge (``hello world 29`` gave ``>>>hello<<< world...``),
where FTS5's snippet of a short message shows all of it.

The headline is made on the cut text (:func:`marks_on_text`), whose edges
PostgreSQL trims of the spaces the punctuation became; FTS5's snippet keeps
a path's leading ``/`` or a sentence's last ``.``.
"""


@lru_cache(maxsize=1)
def nth_newest_statement(index: str = "") -> TextClause:
    """The id of the n-th (0-based) match at or below ``:p_high``: a rank window's edge.

    ``index`` is accepted for the shape of SQLite's edge statement and
    ignored: PostgreSQL has one word index. Only ids and stored vectors are
    read, no text is parsed, nothing is sorted beyond n + 1 ids.
    """
    return text(
        f"{CUSTOM_PLAN}SELECT m.id FROM messages m "
        f"WHERE {TSVECTOR} @@ {TSQUERY} AND m.id <= :p_high "
        "ORDER BY m.id DESC LIMIT 1 OFFSET :p_nth"
    )


PHRASE = "<->"
"""A tsquery with this operator checks positions: see :func:`read_window`."""
WALK_ROWS_PER_MATCH = 20
"""A phrase's window is looked for among this many newest rows a match first."""
LONGEST_WALK_ROWS_PER_MATCH = 64
"""The bound of a phrase's second walk, sized by the first's density (:func:`read_window`).

Past it a phrase's matches are sparse enough that reading every GIN
candidate costs less than walking the rows between them.
"""
WALK_MARGIN = 1.25
"""How far past the first walk's estimate the second walks: matches are not spread evenly."""


@lru_cache(maxsize=64)
def word_statement(sources: bool, excluded: bool, roles: bool, walk: bool = False) -> TextClause:
    """One prebuilt statement per combination of filters: one rank window, read once.

    ``:p_query`` is a :func:`hermes_store.backends.postgresql.tsquery.tsquery_text`.
    The window is the ``:p_window`` newest matches at or below ``:p_high``,
    counted before the filters and read in one scan into ``win`` (the last
    window, everything older, is :func:`last_window_statement`); the
    statement returns the window's edge (its oldest id when it holds
    ``:p_window`` matches, else NULL: no older window) and the page, so the
    edge costs no second scan. The page is
    chosen from the window's ids and stored vectors only (``ts_rank``,
    normalised by document length like bm25; ties newest first, so paging is
    stable), joining ``sessions`` only when a source filter needs it; then
    ``ts_headline`` runs for the page's rows alone: it re-parses the
    content. ``walk``: the window is looked for only among the ``:p_walk``
    newest rows at or below ``:p_high``, read newest first from the primary
    key (see :func:`read_window`). The headline is one fragment; ``...`` is added on a side where
    the content goes on, as FTS5's snippet() does. An empty page is one row
    of NULLs beside the edge (see :func:`read_window`).
    """
    filters, expanding = filter_sql(sources, excluded, roles, "w")
    sessions = "JOIN sessions s ON s.id = w.session_id" if sources or excluded else ""
    rows = "messages m"
    if walk:
        rows = f"""(
                SELECT m.id, m.session_id, m.role, {TSVECTOR} FROM messages m
                WHERE m.id <= :p_high ORDER BY m.id DESC LIMIT :p_walk
            ) AS m"""
    sql = f"""{CUSTOM_PLAN}
        WITH win AS MATERIALIZED (
            SELECT m.id, m.session_id, m.role, {TSVECTOR} AS vector
            FROM {rows}
            WHERE {TSVECTOR} @@ {TSQUERY} AND m.id <= :p_high
            ORDER BY m.id DESC
            LIMIT :p_window
        ), edge AS (
            SELECT CASE WHEN COUNT(*) = :p_window THEN MIN(id) END AS low,
                   COUNT(*) AS found
            FROM win
        ), page AS (
            SELECT w.id, ts_rank(w.vector, {TSQUERY}, 1) AS rank
            FROM win w
            {sessions}
            WHERE TRUE {filters}
            ORDER BY rank DESC, w.id DESC
            LIMIT :p_limit
        )
        SELECT edge.low AS window_low, edge.found AS window_found, hit.*
        FROM edge LEFT JOIN ({_HITS}) AS hit ON TRUE
        ORDER BY hit.rank DESC, hit.id DESC
    """
    return text(sql).bindparams(*expanding)


_HITS = f"""
            SELECT m.id, m.session_id, m.role,
                   CASE WHEN hl.found_at = 0 THEN ''
                        WHEN hl.found_at - 1 <= {EDGE_CHARS} THEN LEFT(hl.content, hl.found_at - 1)
                        ELSE '{ELLIPSIS}' END AS snippet_before,
                   hl.headline AS snippet,
                   CASE WHEN hl.found_at > 0
                        THEN SUBSTR(hl.content, hl.found_at, LENGTH(hl.plain)) END AS snippet_text,
                   CASE WHEN hl.found_at = 0 THEN ''
                        WHEN LENGTH(hl.cut) - hl.found_at - LENGTH(hl.plain) < {EDGE_CHARS}
                             THEN SUBSTR(hl.content, hl.found_at + LENGTH(hl.plain))
                        ELSE '{ELLIPSIS}' END AS snippet_after,
                   m.timestamp, m.tool_name,
                   s.source, s.model, s.started_at AS session_started,
                   page.rank
            FROM page
            JOIN messages m ON m.id = page.id
            JOIN sessions s ON s.id = m.session_id
            CROSS JOIN LATERAL (
                SELECT marked.content, marked.cut, marked.headline, marked.plain,
                       POSITION(marked.plain IN marked.cut) AS found_at
                FROM (
                    SELECT made.content, made.cut, made.headline,
                           REPLACE(REPLACE(made.headline, '>>>', ''), '<<<', '') AS plain
                    FROM (
                        SELECT cut.content, cut.cut,
                               CASE WHEN cut.marked THEN cut.first
                                    ELSE ts_headline('simple', cut.cut, {TSQUERY},
                                                     '{HEADLINE_OPTIONS}') END AS headline
                        FROM (
                            SELECT first.content, first.first, first.marked,
                                   CASE WHEN first.marked THEN first.content
                                        ELSE {cut_text(INDEXED_TEXT)} END AS cut
                            FROM (
                                SELECT COALESCE(m.content, '') AS content, headline AS first,
                                       POSITION('>>>' IN headline) > 0 AS marked
                                FROM ts_headline('simple', {INDEXED_TEXT}, {TSQUERY},
                                                 '{HEADLINE_OPTIONS}') AS headline
                                OFFSET 0
                            ) AS first
                        ) AS cut
                        OFFSET 0
                    ) AS made
                ) AS marked
            ) AS hl
"""
"""The page's rows (``page``: id, rank) with their snippets and sessions."""


@lru_cache(maxsize=64)
def last_window_statement(sources: bool, excluded: bool, roles: bool) -> TextClause:
    """The last rank window, every match at or below ``:p_high``: filtered, then ranked.

    Unlike :func:`word_statement` it holds no window in memory (at a million
    messages a phrase can have 60,000 older matches): the filters are tested
    as the matches are found, where ``idx_messages_role`` can narrow them
    before any row is read, and only the rows they pass are ranked. Its
    edge is always NULL: nothing is older.
    """
    filters, expanding = filter_sql(sources, excluded, roles)
    sessions = "JOIN sessions s ON s.id = m.session_id" if sources or excluded else ""
    sql = f"""{CUSTOM_PLAN}
        WITH page AS (
            SELECT m.id, ts_rank({TSVECTOR}, {TSQUERY}, 1) AS rank
            FROM messages m
            {sessions}
            WHERE {TSVECTOR} @@ {TSQUERY} AND m.id <= :p_high {filters}
            ORDER BY rank DESC, m.id DESC
            LIMIT :p_limit
        )
        SELECT CAST(NULL AS BIGINT) AS window_low, hit.* FROM ({_HITS}) AS hit
        ORDER BY hit.rank DESC, hit.id DESC
    """
    return text(sql).bindparams(*expanding)


def read_window(
    connection: Connection,
    statement: TextClause,
    edge: TextClause,
    params: dict[str, Any],
    nth: int | None,
) -> tuple[list[dict[str, Any]], int | None]:
    """(the page of one rank window, the window's oldest id or None when it is the last).

    ``statement`` is a :func:`word_statement`; ``params`` are the search's,
    with ``p_high`` and ``p_limit`` for this window; ``nth`` is the window's
    size less one (None: everything older). ``edge`` (the shape SQLite's
    reader needs) is not run: the statement returns the edge itself.

    A phrase's window is first looked for by walking the newest rows from
    the primary key, at most :data:`WALK_ROWS_PER_MATCH` rows a match of the
    window: the planner estimates a phrase's matches as if its words were
    independent, far fewer than a common phrase has, and so reads every
    candidate of the GIN index (each row's positions checked) where the
    walk stops at the window's oldest match. Found whole, that window is the
    one the full statement finds (the same newest matches). Found in part,
    the matches it did find tell how densely the phrase occurs among the
    newest rows, and a second walk goes as far as that density says the
    window reaches (with :data:`WALK_MARGIN`), unless that is past
    :data:`LONGEST_WALK_ROWS_PER_MATCH` rows a match. Otherwise the full
    statement runs, and the walks were the price (bounded ones).
    """
    filters = ("p_sources" in params, "p_excluded" in params, "p_roles" in params)
    if nth is None:
        return _last_window(connection, last_window_statement(*filters), params)
    window = nth + 1
    if PHRASE in params["p_query"]:
        walk = WALK_ROWS_PER_MATCH * window
        while walk:
            walked = {**params, "p_window": window, "p_walk": walk}
            found = connection.execute(word_statement(*filters, walk=True), walked)
            walk_rows = found.mappings().all()
            page, low = _page(walk_rows)
            if low is not None:  # the window was found whole among the walked rows
                return page, low
            walk = _longer_walk(walk, window, walk_rows[0]["window_found"] if walk_rows else 0)
    rows = connection.execute(statement, {**params, "p_window": window})
    return _page(rows.mappings().all())


def _longer_walk(walked: int, window: int, found: int) -> int:
    """The rows a second walk reads to find ``window`` matches, or 0: not worth walking.

    ``found`` matches were among the ``walked`` newest rows; only the first
    walk (:data:`WALK_ROWS_PER_MATCH` rows a match) is extended.
    """
    if walked != WALK_ROWS_PER_MATCH * window or found == 0:
        return 0
    longer = math.ceil(walked * window / found * WALK_MARGIN)
    return longer if longer <= LONGEST_WALK_ROWS_PER_MATCH * window else 0


LAST_WINDOW_WORK_MEM = "32MB"
"""``work_mem`` while :func:`last_window_statement` runs (and only then).

The last window intersects the word index's bitmap with ``idx_messages_role``'s;
with the server's default the role's bitmap of a large store no longer fits,
turns lossy (whole pages), and every match on those pages, of any role, has
its stored vector read and its positions checked (docs/design/search.md, "What
still misses at a million messages"). A bitmap takes only the memory it
needs, so a small window costs no more.
"""


def _last_window(
    connection: Connection, statement: TextClause, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], int | None]:
    """:func:`last_window_statement` run with :data:`LAST_WINDOW_WORK_MEM`, then the old value back.

    ``set_config(..., true)`` is local to the transaction (nothing is left on a
    pooled connection), and the old value is put back after the statement so
    the search's other statements run as they did.
    """
    was = connection.execute(_WORK_MEM, {"p_mem": LAST_WINDOW_WORK_MEM}).scalar()
    rows = connection.execute(statement, {**params, "p_window": None}).mappings().all()
    connection.execute(_WORK_MEM_BACK, {"p_mem": was})
    return _page(rows)


_WORK_MEM = text(
    "SELECT current_setting('work_mem') AS was, set_config('work_mem', :p_mem, true) AS now"
)
_WORK_MEM_BACK = text("SELECT set_config('work_mem', :p_mem, true)")


_WINDOW_COLUMNS = frozenset(
    ("window_low", "window_found", "rank", "snippet_before", "snippet_text", "snippet_after")
)
"""What a window statement returns beside a hit's own columns."""
_MARKS = (">>>", "<<<")


def _page(rows: Sequence[Any]) -> tuple[list[dict[str, Any]], int | None]:
    """A window statement's rows as (the page, the window's edge)."""
    low = rows[0]["window_low"] if rows else None
    page = []
    for row in rows:
        if row["id"] is None:
            continue
        hit = {key: value for key, value in row.items() if key not in _WINDOW_COLUMNS}
        marked = marks_on_text(row["snippet"], row["snippet_text"])
        hit["snippet"] = row["snippet_before"] + marked + row["snippet_after"]
        page.append(hit)
    return page, low


def marks_on_text(headline: str, text: str | None) -> str:
    """``headline``'s marks put back on ``text``, the characters they were made on as written.

    A headline is first made on the text as written; only when it marks
    nothing (the words were found inside a path, a host, a version, which
    PostgreSQL's parser reads as one token) is it made again on the text cut
    by :func:`cut_text`, which differs from ``text`` only where punctuation
    became a space: cutting every hit's text cost more than the rest of the
    page. The marks of a cut headline cannot come from the text, whose
    ``<`` and ``>`` were cut.
    """
    if text is None:
        return headline
    out: list[str] = []
    at = 0
    i = 0
    while i < len(headline):
        mark = headline[i : i + 3]
        if mark in _MARKS:
            out.append(mark)
            i += 3
            continue
        if at == len(text):
            return headline  # the text's own ">>>" or "<<<" read as marks: keep it as made
        out.append(text[at])
        at += 1
        i += 1
    return "".join(out) if at == len(text) else headline


@lru_cache(maxsize=64)
def pair_statement(
    like_sql: str, sources: bool, excluded: bool, roles: bool, anchors: int
) -> TextClause:
    """A substring test bounded by the CJK pair index (revision 0018), newest first.

    The shape of SQLite's pair route (:func:`hermes_store.backends.sqlite.search.match_statement`
    with ``anchors``), in PostgreSQL's join syntax: one pair is read
    newest first from the index's primary key ``(gram, message_id)``, so a
    page of a frequent term stops after a page of candidates; several (one
    per ``OR`` branch) are the union of their messages. The ``ILIKE`` test
    decides on those rows alone. Each candidate's row is read by its id
    behind ``OFFSET 0``, so the ``ILIKE`` cannot be handed to pg_trgm's index
    instead: the planner underestimates how many rows that index leaves to
    recheck for two needles, where the pairs bound the walk.

    The filters are tested inside that fence, so before the ``ILIKE``
    (outside it the planner tests the costlier needle first, whichever order
    the SQL writes): the role as the candidate's row is read, then the
    source by a probe of ``sessions`` for the rows whose role passed, and
    the needles read and fold the text of only the rows the filters pass.
    Unfiltered by source, ``sessions`` is joined after the ``ILIKE``: one
    probe a hit, not one a candidate.
    """
    filters, expanding = filter_sql(sources, excluded, roles, "r")
    if anchors == 1:
        candidates = f"SELECT message_id FROM {PAIR_TABLE} WHERE gram = :p_gram0"
    else:
        grams = ", ".join(f":p_gram{n}" for n in range(anchors))
        candidates = f"SELECT DISTINCT message_id FROM {PAIR_TABLE} WHERE gram IN ({grams})"
    row = "r.id, r.session_id, r.role, r.content, r.timestamp, r.tool_name"
    session = "s.source, s.model, s.started_at AS session_started"
    if sources or excluded:
        inner = f"{row}, {session} FROM messages r JOIN sessions s ON s.id = r.session_id"
        picked, outer = "m.source, m.model, m.session_started", ""
    else:
        inner, picked = f"{row} FROM messages r", session
        outer = "JOIN sessions s ON s.id = m.session_id"
    sql = f"""{CUSTOM_PLAN}
        SELECT m.id, m.session_id, m.role, m.content AS snippet, m.timestamp, m.tool_name,
               {picked}
        FROM ({candidates}) AS g
        CROSS JOIN LATERAL (
            SELECT {inner}
            WHERE r.id = g.message_id {filters} OFFSET 0
        ) AS m
        {outer}
        WHERE {like_sql}
        ORDER BY g.message_id DESC
        LIMIT :p_limit OFFSET :p_offset
    """
    return text(sql).bindparams(*expanding)


@lru_cache(maxsize=64)
def scan_statement(like_sql: str | None, sources: bool, excluded: bool, roles: bool) -> TextClause:
    """The portable substring scan (SQLite's :func:`match_statement`), planned for its needles.

    Whether pg_trgm's index or a walk of the primary key is cheaper depends on
    the needle, so the statement is never given a generic plan
    (:mod:`.plans`).
    """
    portable = match_statement(None, like_sql, sources, excluded, roles)
    _, expanding = filter_sql(sources, excluded, roles)
    return text(CUSTOM_PLAN + portable.text).bindparams(*expanding)


@lru_cache(maxsize=4)
def hit_list_statement(chars: int) -> TextClause:
    """Every hit's context in one statement: the page's ids and sessions as two arrays.

    ``unnest(:p_ids, :p_sessions) WITH ORDINALITY`` makes one row a hit in
    page order; for each, a ``LATERAL`` union finds the message before it,
    the hit itself and the message after it in the session's own order
    (timestamp, id), each neighbour one probe of ``idx_messages_session``, as
    the one-hit statement of :mod:`hermes_store.repositories.search` does.
    A page of twenty hits is then one round trip instead of twenty; a hit
    whose row is gone has no context, as there.
    """
    near = """
            SELECT m.id, m.role, m.content, m.timestamp FROM messages m
            WHERE m.session_id = h.session_id AND m.timestamp {cmp}= hit.timestamp
              AND (m.timestamp {cmp} hit.timestamp OR m.id {cmp} hit.id)
            ORDER BY m.timestamp {order}, m.id {order} LIMIT 1"""
    return text(
        f"""
        SELECT h.hit, n.role, COALESCE(SUBSTR(n.content, 1, {int(chars)}), '') AS content
        FROM unnest(CAST(:p_ids AS BIGINT[]), CAST(:p_sessions AS TEXT[]))
             WITH ORDINALITY AS h(id, session_id, hit)
        JOIN messages hit ON hit.id = h.id
        CROSS JOIN LATERAL (
            SELECT * FROM ({near.format(cmp="<", order="DESC")}) AS earlier
            UNION ALL
            SELECT hit.id, hit.role, hit.content, hit.timestamp
            UNION ALL
            SELECT * FROM ({near.format(cmp=">", order="")}) AS later
        ) AS n
        ORDER BY h.hit, n.timestamp, n.id
        """
    )


class PostgresqlSearch:
    """What search uses on PostgreSQL: the stored tsvector, the CJK pairs, pg_trgm for ILIKE.

    There is one word index and no trigram table. A CJK term of two or more
    characters is bounded by the pair index (:func:`pair_statement`, revision
    0018); any other substring test is
    :func:`hermes_store.backends.sqlite.search.match_statement`'s portable scan,
    with ``ILIKE``, which the pg_trgm index serves for needles of three or more
    characters.
    """

    visible = ""
    has_word_index = True
    has_trigram = False
    trigram_skips_tool_rows = False
    has_bigrams = True
    spells_out_prefixes = False
    subtracts_words = False
    substring_like = "ILIKE"

    def word_query(self, connection: Connection, items: list[str]) -> str:
        """A ``to_tsquery('simple', ...)`` text (:func:`.tsquery.tsquery_text`)."""
        return tsquery_text(items)

    def match_statement(
        self,
        index: str | None,
        like_sql: str | None,
        filtered: tuple[bool, bool, bool],
        anchors: int,
        ranked: bool,
        besides: str | None,
    ) -> TextClause:
        """:func:`word_statement` for the word index, the portable scan for a substring."""
        if index == STORE_WORD_INDEX:
            return word_statement(*filtered)
        if index is None and anchors:
            assert like_sql is not None, "a pair-bounded test needs its ILIKE condition"
            return pair_statement(like_sql, *filtered, anchors)
        if index is None:
            return scan_statement(like_sql, *filtered)
        raise ValueError(f"PostgreSQL has no {index!r} index; substring search is index=None")

    def nth_newest_statement(self, index: str) -> TextClause:
        """The id of the n-th newest match (:func:`nth_newest_statement`)."""
        return nth_newest_statement(index)

    def read_window(
        self,
        connection: Connection,
        statement: TextClause,
        edge: TextClause,
        params: dict[str, Any],
        nth: int | None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The window and its edge in one statement (:func:`read_window`)."""
        return read_window(connection, statement, edge, params, nth)

    def substring_indexed(self, needles: Sequence[str]) -> bool:
        """pg_trgm serves ILIKE when every needle has a trigram."""
        return min(map(len, needles)) >= TRIGRAM

    def hit_list_statement(self, chars: int) -> TextClause:
        """A page's contexts in one round trip (:func:`hit_list_statement`)."""
        return hit_list_statement(chars)
