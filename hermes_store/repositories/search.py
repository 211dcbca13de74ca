"""Full-text search over messages, with context: FTS5 on SQLite, tsvector on PostgreSQL.

The statements are the dialect's own; the rows they return have the same
columns on both, and :class:`SearchRepository` picks by ``connection.dialect``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends import backend_of
from hermes_store.backends.layout import BIGRAM_TABLE, STANDARD, TRIGRAM_INDEX, WORD_INDEX, Layout
from hermes_store.backends.prepared import Prepared
from hermes_store.domain.arguments import INT64_MAX, bool_arg, int_arg, names_arg
from hermes_store.domain.bigrams import branch_grams
from hermes_store.domain.query_syntax import query_items
from hermes_store.domain.records import ContextLine, SearchHit
from hermes_store.domain.search_options import SORT_WINDOW, capped_query, sort_arg, time_ordered
from hermes_store.domain.substrings import has_cjk, make_snippet, substring_query
from hermes_store.errors import InvalidInputError

CONTEXT_CHARS = 200

# Neighbours in the session's own order (timestamp, id), found through
# idx_messages_session: "the previous message" needs no sort of the session.
# Every subquery is aliased, which PostgreSQL before 16 requires and SQLite
# accepts, so one statement serves both. It runs once per hit, so it is
# Prepared: on SQLite that skips SQLAlchemy's per-call work, which cost more
# than the three index lookups.
_CONTEXT_SQL = f"""
    SELECT role, COALESCE(SUBSTR(content, 1, {CONTEXT_CHARS}), '') AS content FROM (
        SELECT * FROM (
            SELECT m.id, m.role, m.content, m.timestamp FROM messages m
            JOIN messages hit ON hit.id = :p_id
            WHERE m.session_id = :p_session AND m.timestamp <= hit.timestamp
              AND (m.timestamp < hit.timestamp OR m.id < hit.id){{visible}}
            ORDER BY m.timestamp DESC, m.id DESC LIMIT 1) AS earlier
        UNION ALL
        SELECT id, role, content, timestamp FROM messages WHERE id = :p_id
        UNION ALL
        SELECT * FROM (
            SELECT m.id, m.role, m.content, m.timestamp FROM messages m
            JOIN messages hit ON hit.id = :p_id
            WHERE m.session_id = :p_session AND m.timestamp >= hit.timestamp
              AND (m.timestamp > hit.timestamp OR m.id > hit.id){{visible}}
            ORDER BY m.timestamp, m.id LIMIT 1) AS later
    ) AS neighbourhood
    ORDER BY timestamp, id
"""


@lru_cache(maxsize=16)
def _context_statement(visible: str) -> Prepared:
    """The context statement; ``visible`` hides the agent's rewound rows where it has them."""
    return Prepared(text(_CONTEXT_SQL.format(visible=visible)))


FTS_INDEX = WORD_INDEX


def rejected_query(connection: Connection, error: DBAPIError) -> bool:
    """True when the engine refused the search expression, not when the database failed.

    Each backend knows its own refusal (:meth:`~hermes_store.backends.base.Backend.rejected_query`):
    an I/O error or a damaged index must not read as "no matches".
    """
    return backend_of(connection).rejected_query(error)


RANK_WINDOW = 1_000
"""K: bm25 ranks the newest K matches first, then the next K, then all older ones.

FTS5's ``ORDER BY rank`` scores every match before it returns twenty, which
at a million messages is seconds for a common word. The store splits a
query's matches, newest first, into windows of K and ranks within a window:
the first page holds the best-ranked of the newest K matches (of those the
filters let through; a window left with too few goes on in the next). A
query with at most K matches has one window, so its order is exactly
bm25's. K was chosen by measurement (rank cost is linear in the window):
see the design notes, "Search at field size".
"""

RANK_WINDOWS = 3
"""Windows of K, K, and everything older: a page never waits for more than three."""


class FirstEdge(NamedTuple):
    """What a ranking's first window probed: the rowid of the query's K-th newest match."""

    low: int | None
    """None: the query has fewer than K matches (it is ranked as a whole)."""


_ROWID_LOW, _ROWID_HIGH = -INT64_MAX - 1, INT64_MAX


_GRAM_ROWS = text(
    f"SELECT COUNT(*) FROM (SELECT 1 FROM {BIGRAM_TABLE} WHERE gram = :p_gram LIMIT :p_cap)"
    " AS probe"
)
_GRAM_PROBE_CAP = 5_000


class SearchRepository:
    """Runs the dialect's search statements; callers pass an already sanitized query.

    On SQLite it uses the indexes the file has (see :mod:`hermes_store.backends.layout`):
    the word index in any of its shapes, the trigram index when there is one
    this process can read, and substring scans otherwise.
    """

    def __init__(self, connection: Connection, layout: Layout = STANDARD) -> None:
        self._c = connection
        self._search = backend_of(connection).search(connection, layout)
        search = self._search
        self._visible = search.visible
        self.has_word_index = search.has_word_index
        """A word index answers MATCH here (else word queries become substring scans)."""
        self.has_trigram = search.has_trigram
        """A trigram table answers substring queries of three or more characters."""
        self.trigram_skips_tool_rows = search.trigram_skips_tool_rows
        """The trigram table leaves ``role = 'tool'`` rows out (the agent's v23+ layout)."""
        self.has_bigrams = search.has_bigrams
        """Our CJK pair index answers short CJK terms (else they scan with LIKE)."""
        self.spells_out_prefixes = search.spells_out_prefixes
        """``deploy*`` becomes the ``OR`` of the word index's terms under it (SQLite)."""

    def word_query(self, items: list[str]) -> str:
        """Sanitized query items (fts_query.query_items) in this backend's syntax.

        An FTS5 MATCH expression on SQLite, a ``to_tsquery('simple', ...)``
        text on PostgreSQL; :meth:`match` with the word index takes either. On SQLite a
        prefix is spelled out as the terms under it where that is exact (see
        :mod:`hermes_store.domain.prefixes`).
        """
        return self._search.word_query(self._c, items)

    def match(
        self,
        fts_query: str | None,
        *,
        index: str | None = FTS_INDEX,
        like_sql: str | None = None,
        like_params: dict[str, str] | None = None,
        source_filter: Sequence[str] | None = None,
        exclude_sources: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        grams: Sequence[str] | None = None,
        ranked: bool = True,
        besides_words: str | None = None,
    ) -> list[dict[str, Any]]:
        """Matches best first; raises the driver's error on a query the engine rejects.

        Each match: ``id, session_id, role, snippet, timestamp, tool_name,
        source, model, session_started`` (no context: see :meth:`context`).

        ``index`` is the FTS5 table (unicode61 by default, or the trigram one);
        ``index=None`` with ``like_sql``/``like_params`` runs a substring scan,
        whose ``snippet`` column then holds the whole content. On PostgreSQL
        the default ``index`` means the tsvector GIN index and ``fts_query``
        is a :meth:`word_query` text; there is no trigram table (substring
        search is ``index=None`` with ILIKE, served by pg_trgm). ``grams`` (SQLite,
        ``index=None``) bounds the substring test to the messages the CJK pair
        index holds under any of them; the caller makes sure every match is
        among those (:func:`hermes_store.domain.bigrams.branch_grams`).
        ``ranked=False`` (SQLite, an FTS5 ``index``) returns the matches newest
        first instead of in bm25 windows. ``besides_words`` (SQLite, an FTS5
        ``index``) is a :meth:`word_query` whose word-index matches are left out.
        """
        statement, params, windows = self._prepared(
            fts_query,
            index=index,
            like_sql=like_sql,
            like_params=like_params,
            source_filter=source_filter,
            exclude_sources=exclude_sources,
            role_filter=role_filter,
            limit=limit,
            offset=offset,
            grams=grams,
            ranked=ranked,
            besides_words=besides_words,
        )
        if windows is None:
            return [dict(row) for row in self._c.execute(statement, params).mappings()]
        return self._windowed(statement, params, windows)[0]

    def _prepared(
        self,
        fts_query: str | None,
        *,
        index: str | None,
        like_sql: str | None,
        like_params: dict[str, str] | None,
        source_filter: Sequence[str] | None,
        exclude_sources: Sequence[str] | None,
        role_filter: Sequence[str] | None,
        limit: int,
        offset: int,
        grams: Sequence[str] | None,
        ranked: bool,
        besides_words: str | None,
    ) -> tuple[TextClause, dict[str, Any], TextClause | None]:
        """:meth:`match`'s statement and parameters, and the edge probe of its rank
        windows (None: the statement runs as it is, unwindowed)."""
        filtered = (bool(source_filter), bool(exclude_sources), bool(role_filter))
        anchors = len(grams or ())
        statement = self._search.match_statement(
            index, like_sql, filtered, anchors, ranked, besides_words
        )
        params: dict[str, Any] = {"p_query": fts_query, "p_limit": limit, "p_offset": offset}
        if besides_words is not None:
            params["p_words"] = besides_words
        params.update(like_params or {})
        if source_filter:
            params["p_sources"] = list(source_filter)
        if exclude_sources:
            params["p_excluded"] = list(exclude_sources)
        if role_filter:
            params["p_roles"] = list(role_filter)
        params.update({f"p_gram{n}": gram for n, gram in enumerate(grams or ())})
        if not (index is None or ranked):
            params.update(p_low=_ROWID_LOW, p_high=_ROWID_HIGH)
        if index is None or not ranked:
            return statement, params, None
        return statement, params, self._search.nth_newest_statement(index)

    def _windowed(
        self, statement: TextClause, params: dict[str, Any], nth: TextClause
    ) -> tuple[list[dict[str, Any]], FirstEdge | None]:
        """The page ``p_offset``, ``p_limit`` of bm25 order within windows of newest matches.

        The query's matches, newest first and counted before filters, fall
        into :data:`RANK_WINDOWS` windows: K, K again, then every older match
        in one; each window is the rowid range from its newest to its oldest
        match (the backend's ``nth_newest_statement``) and is ranked on its own. A
        filtered search is the unfiltered order with the other rows left out,
        and one whose filters let few rows through costs at most what the
        unbounded ranking costs (three windows, the last one everything
        older). A query of at most K matches is ranked as a whole. Windows
        are read newest first until the page is full.

        Also returns the first window's edge, which answers
        :meth:`_common_words` for this query without a second probe (None
        when no window was probed).
        """
        limit, offset = params["p_limit"], params["p_offset"]
        need = min(offset + limit, INT64_MAX)
        found: list[dict[str, Any]] = []
        first: FirstEdge | None = None
        high = _ROWID_HIGH
        for window in range(RANK_WINDOWS):
            nth_k = RANK_WINDOW - 1 if window < RANK_WINDOWS - 1 else None
            page = {**params, "p_high": high, "p_limit": need - len(found), "p_offset": 0}
            rows, low = self._search.read_window(self._c, statement, nth, page, nth_k)
            if window == 0:
                first = FirstEdge(low)
            found += rows
            if low is None or low <= _ROWID_LOW or len(found) >= need:
                break
            high = low - 1
        return found[offset:], first

    def context(self, session_id: str, message_id: int) -> list[dict[str, Any]]:
        """The match and one message each side of it in its session, cut to 200 chars."""
        return _context_statement(self._visible).dicts(
            self._c, {"p_session": session_id, "p_id": message_id}
        )

    def contexts(self, hits: Sequence[tuple[str, int]]) -> list[list[dict[str, Any]]]:
        """:meth:`context` of each ``(session_id, message_id)``, in the order given.

        Where the backend offers a hit list (its ``hit_list_statement``), the
        whole page is one statement; else one :meth:`context` a hit.
        """
        statement = self._search.hit_list_statement(CONTEXT_CHARS)
        if statement is None or not hits:
            return [self.context(session_id, message_id) for session_id, message_id in hits]
        params = {"p_sessions": [h[0] for h in hits], "p_ids": [h[1] for h in hits]}
        found: list[list[dict[str, Any]]] = [[] for _ in hits]
        for row in self._c.execute(statement, params):
            found[row.hit - 1].append({"role": row.role, "content": row.content})
        return found

    # -- the search the old class offers ----------------------------------
    def search(
        self,
        query: str,
        *,
        source_filter: Sequence[str] | None = None,
        exclude_sources: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        sort: str = "relevance",
        with_context: bool = True,
    ) -> list[SearchHit]:
        """Matches of what a person typed, best first, each with its snippet and context.

        The query language is FTS5's (words, ``"phrases"``, ``OR``, ``NOT``,
        ``-term``, ``prefix*``), sanitized first; a query the sanitizer cannot
        rescue, or one the engine still rejects, finds nothing rather than
        raising -- search input comes straight from people -- while a
        database that fails raises, as anywhere else. The filters keep the old
        class's names (``SessionDB.search_messages`` passes them through):
        ``source_filter=[]`` allows no source and finds nothing, as the old
        class's ``IN ()``; empty ``exclude_sources`` and ``role_filter`` filter
        nothing. ``sort="newest"``/``"oldest"`` orders the best matches by time,
        ``with_context=False`` skips the neighbour reads, and a very long query
        is cut (see :mod:`hermes_store.domain.search_options`).
        """
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
        sort = sort_arg(sort)
        with_context = bool_arg("with_context", with_context)
        query = capped_query(query)
        limit = int_arg("limit", limit, minimum=0)
        offset = int_arg("offset", offset, minimum=0)
        filters = {
            "source_filter": names_arg("source_filter", source_filter),
            "exclude_sources": names_arg("exclude_sources", exclude_sources),
            "role_filter": names_arg("role_filter", role_filter),
            "limit": limit,
            "offset": offset,
        }
        items = query_items(query)
        if not items or filters["limit"] == 0 or filters["source_filter"] == []:
            return []
        page = slice(offset, offset + limit)
        if sort != "relevance":  # the best matches, then their time order
            filters = {**filters, "limit": SORT_WINDOW, "offset": 0}
        try:
            matches = self._ranked(query, items, filters)
        except (OperationalError, ProgrammingError) as error:
            if not rejected_query(self._c, error):
                raise  # the database failed: that is no "no matches"
            return []
        if sort != "relevance":
            matches = time_ordered(matches, sort)[page]
        if not with_context:
            return [SearchHit(**match) for match in matches]
        contexts = self.contexts([(match["session_id"], match["id"]) for match in matches])
        return [
            SearchHit(**match, context=tuple(ContextLine(**line) for line in context))
            for match, context in zip(matches, contexts, strict=True)
        ]

    def _ranked(
        self, query: str, items: list[str], filters: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Word matches first (unicode61 / tsvector), then substring matches.

        A CJK query goes to the substring route only. Any other query asks the
        word index first; when that cannot fill the page, substring matches of
        terms of three or more characters follow, which finds Latin words glued
        into CJK text (``修改youer服务端``). Short Latin terms never scan: "x"
        as a substring would match nearly everything. A query with
        :data:`RANK_WINDOW` or more word matches gets no substring matches
        (see :meth:`_common_words`).
        """
        if has_cjk(query) or not self.has_word_index:
            return self._substrings(items, filters, allow_scan=True)
        limit, offset = filters["limit"], filters["offset"]
        end = min(offset + limit, INT64_MAX)  # a LIMIT is 64-bit, so is the page's end
        window = {**filters, "limit": end, "offset": 0}
        word_query = self.word_query(items)
        words, edge = self._ranked_words(word_query, window)
        if len(words) == end or self._common_words(word_query, edge):
            return words[offset:]
        seen = {match["id"] for match in words}
        besides = word_query if self._search.subtracts_words else None
        substrings = self._substrings(items, window, allow_scan=False, besides_words=besides)
        merged = words + [match for match in substrings if match["id"] not in seen]
        return merged[offset : offset + limit]

    def _ranked_words(
        self, word_query: str, window: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], FirstEdge | None]:
        """The word index's matches in rank windows, and the first window's edge.

        The edge comes back with the matches, not kept on the repository:
        only this search's own ranking can answer :meth:`_common_words` for it.
        """
        statement, params, windows = self._prepared(
            word_query,
            index=FTS_INDEX,
            like_sql=None,
            like_params=None,
            grams=None,
            ranked=True,
            besides_words=None,
            **window,
        )
        if windows is None:
            return [dict(row) for row in self._c.execute(statement, params).mappings()], None
        return self._windowed(statement, params, windows)

    def _common_words(self, word_query: str, edge: FirstEdge | None) -> bool:
        """True when the word index holds :data:`RANK_WINDOW` matches or more.

        Such a query gets no substring matches after its word matches. They
        would come after every one of its word matches (the first page of an
        unfiltered search never reaches them), and finding them walks the
        trigram index for every message holding the text: for a common phrase
        a long walk whenever filters leave the page short, to add nothing.
        Counted as the rank windows count
        (before filters; one walk of K doclist entries), so the rule is the
        same on every page and with every filter: a filtered search stays the
        unfiltered order with the other rows left out. A word glued into CJK
        text (``修改youer服务端``) is still found when the word occurs fewer
        than K times on its own.
        """
        if edge is not None:
            return edge.low is not None  # this query's ranking just probed it
        probe = {"p_query": word_query, "p_high": _ROWID_HIGH, "p_nth": RANK_WINDOW - 1}
        return (
            self._c.execute(self._search.nth_newest_statement(FTS_INDEX), probe).scalar()
            is not None
        )

    def _substrings(
        self,
        items: list[str],
        filters: dict[str, Any],
        *,
        allow_scan: bool,
        besides_words: str | None = None,
    ) -> list[dict[str, Any]]:
        """Substring matches: FTS5 trigram or LIKE on SQLite, ILIKE on PostgreSQL.

        ``allow_scan=False`` keeps to what an index answers: terms of three or
        more characters (the trigram table; pg_trgm for ILIKE on PostgreSQL).
        ``besides_words``: the trigram route leaves out the word index's
        matches of that query (the caller has them already); at a phrase in
        60,040 messages whose filters pass 3, reading each of those rows for
        the filters again cost more than the trigram walk itself.
        """
        # The agent's v23+ trigram table leaves tool rows out; a search of tool
        # rows alone scans instead, as the agent's own code does.
        trigram = self.has_trigram and not (
            self.trigram_skips_tool_rows and "tool" in (filters["role_filter"] or ())
        )
        like = self._search.substring_like
        substring = substring_query(items, trigram=trigram, like=like)
        if substring is None:
            return []
        if substring.fts is not None:
            return self.match(
                substring.fts,
                index=TRIGRAM_INDEX,
                ranked=substring.ranked,
                besides_words=besides_words,
                **filters,
            )
        branches = branch_grams(items) if self.has_bigrams else None
        indexed = branches is not None or (self._search.substring_indexed(substring.needles))
        if not (allow_scan or indexed):
            return []
        matches = self.match(
            None,
            index=None,
            like_sql=substring.like_sql,
            like_params=substring.like_params,
            grams=None if branches is None else self._anchors(branches),
            **filters,
        )
        for match in matches:
            match["snippet"] = make_snippet(match["snippet"], substring.needles)
        return matches

    def _anchors(self, branches: list[list[str]]) -> list[str]:
        """Each branch's rarest pair (see :meth:`_rarest`), each pair probed and named once."""
        counts: dict[str, int] = {}
        return list(dict.fromkeys(self._rarest(branch, counts) for branch in branches))

    def _rarest(self, grams: list[str], counts: dict[str, int]) -> str:
        """Of a branch's pairs, the one with the fewest messages (counted up to a cap).

        Any one of them bounds the branch; the rarest leaves the fewest rows
        for the ``LIKE`` test ("问题 鸡蛋" reads the none of 鸡蛋, not every 问题).
        ``counts`` keeps the probes of the search's other branches.
        """
        if len(grams) == 1:
            return grams[0]
        for gram in grams:
            if gram not in counts:
                probe = {"p_gram": gram, "p_cap": _GRAM_PROBE_CAP}
                counts[gram] = int(self._c.execute(_GRAM_ROWS, probe).scalar() or 0)
        return min(grams, key=lambda gram: counts[gram])
