"""SQLite's search statements: FTS5 word and trigram indexes, the CJK pair index, LIKE scans.

:class:`~hermes_store.repositories.search.SearchRepository` asks
:class:`SqliteSearch` (through the :class:`~hermes_store.backends.base.Backend`
protocol) for the statement of a search, a rank window's edge and the
window itself; what the file has (which indexes, in which of the agent's
layouts) comes from its :class:`~hermes_store.backends.layout.Layout`. The
substring scan of :func:`match_statement` (``index=None``, no anchors) is
portable SQL: PostgreSQL runs it with ``ILIKE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.layout import BIGRAM_TABLE, SEARCH_FILTER_INDEX, WORD_INDEX, Layout
from hermes_store.backends.search_filters import filter_sql
from hermes_store.backends.shapes import searchable_messages
from hermes_store.backends.sqlite.fts_vocabulary import terms_under
from hermes_store.domain.arguments import INT64_MAX
from hermes_store.domain.prefixes import TOKENIZERS, spell_out

_ROWID_LOW = -INT64_MAX - 1

PREFIX_TERMS = 32
"""A prefix that stands for at most this many terms is spelled out as their ``OR``.

One probe of the vocabulary per term, and an ``OR`` node per term on each
step of the walk; past this, FTS5's own prefix query runs (it costs the same
whatever the number of terms).
"""


@lru_cache(maxsize=8)
def nth_newest_statement(index: str) -> TextClause:
    """The rowid of the n-th (0-based) match at or below ``:p_high``: a rank window's edge.

    FTS5 walks its doclists in descending rowid order itself, from the rowid
    bound on, so this costs n steps of the doclist, no row lookup, no sort.
    """
    return text(
        f"SELECT rowid FROM {index} WHERE {index} MATCH :p_query AND rowid <= :p_high "
        "ORDER BY rowid DESC LIMIT 1 OFFSET :p_nth"
    )


@lru_cache(maxsize=256)
def match_statement(
    index: str | None,
    like_sql: str | None,
    sources: bool,
    excluded: bool,
    roles: bool,
    visible: str = "",
    anchors: int = 0,
    ranked: bool = True,
    besides: str | None = None,
    filter_index: str | None = None,
) -> TextClause:
    """One prebuilt statement per index, combination of filters and row visibility.

    ``index`` names the FTS5 table to MATCH against, ranked within the rowid
    window ``:p_low`` .. ``:p_high`` (see :data:`RANK_WINDOW`), or newest
    first with ``ranked=False`` (the window then spans every rowid). Unfiltered,
    FTS5 sorts the window by ``rank`` itself and joins only the page's rows;
    filtered, ``+rank`` keeps the sort out of FTS5, so only the rows the filters
    let through are scored (FTS5 would score every match of the window first:
    seconds for a phrase whose filters pass 3 of 60,040 matches), with the
    rowid as FTS5's own tie order. None means a
    substring test of ``messages`` with the boolean ``like_sql`` (see
    cjk_query), newest first, whose snippet is made in Python from the
    returned content. ``anchors`` > 0 bounds that test to the messages the
    CJK pair index holds under ``:p_gram0`` ... (one pair: read in the
    index's own order; several: the union of them); 0 scans every message.
    ``visible`` is an ``AND`` condition that hides rows the file's owner
    hides (the agent's rewound messages). ``besides`` names the word index
    whose matches of ``:p_words`` the statement leaves out, before any row of
    ``messages`` is read for the filters: the substring route after the word
    route wants only what the latter did not find. ``filter_index`` names
    revision 0013's index of (id, role, session_id): an FTS5 statement with
    filters then tests each match there, in that order (``CROSS JOIN``), and
    reads the ``messages`` row of those it keeps alone; without it, every
    match's row is read for its role and session (design notes, "Search at
    field size").
    """
    tested = index is not None and filter_index is not None and not visible
    tested = tested and (sources or excluded or roles)
    filters, expanding = filter_sql(sources, excluded, roles, "x" if tested else "m")
    filters += visible
    columns = """m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name,
               s.source, s.model, s.started_at AS session_started"""
    sessions = "JOIN sessions s ON s.id = m.session_id"
    if index is not None:
        source = f"{index} JOIN messages m ON m.id = {index}.rowid"
        if tested:
            source = (
                f"{index} CROSS JOIN messages x INDEXED BY {filter_index} ON x.id = {index}.rowid"
                " CROSS JOIN sessions s ON s.id = x.session_id"
                f" CROSS JOIN messages m ON m.id = {index}.rowid"
            )
            sessions = ""
        where = f"{index} MATCH :p_query AND {index}.rowid BETWEEN :p_low AND :p_high"
        if besides is not None:
            where += (
                f" AND {index}.rowid NOT IN "
                f"(SELECT rowid FROM {besides} WHERE {besides} MATCH :p_words)"
            )
        if not ranked:
            order = f"{index}.rowid DESC"
        elif filters:
            order = f"+rank, {index}.rowid"
        else:
            order = "rank"
        snippet = f"snippet({index}, 0, '>>>', '<<<', '...', 40)"
    elif anchors == 1:
        source = f"{BIGRAM_TABLE} g CROSS JOIN messages m ON m.id = g.message_id"
        where, order, snippet = (
            f"g.gram = :p_gram0 AND {like_sql}",
            "g.message_id DESC",
            "m.content",
        )
    elif anchors > 1:
        grams = ", ".join(f":p_gram{n}" for n in range(anchors))
        source, order, snippet = "messages m", "m.id DESC", "m.content"
        candidates = f"SELECT message_id FROM {BIGRAM_TABLE} WHERE gram IN ({grams})"
        where = f"m.id IN ({candidates}) AND {like_sql}"
    else:
        assert like_sql is not None, "a substring scan needs its LIKE condition"
        source, where, order, snippet = "messages m", like_sql, "m.id DESC", "m.content"
    sql = f"""
        SELECT {columns.format(snippet=snippet)}
        FROM {source}
        {sessions}
        WHERE {where} {filters}
        ORDER BY {order}
        LIMIT :p_limit OFFSET :p_offset
    """
    return text(sql).bindparams(*expanding)


def edge_then_window(
    connection: Connection,
    statement: TextClause,
    edge: TextClause,
    params: dict[str, Any],
    nth: int | None,
) -> tuple[list[dict[str, Any]], int | None]:
    """(the page of one rank window, its oldest rowid or None when it is the last): SQLite.

    FTS5 finds the edge by walking its doclist (``edge``, :func:`nth_newest_statement`),
    then the window's rowid range is ranked on its own.
    """
    low = None
    if nth is not None:
        probe = {"p_query": params["p_query"], "p_high": params["p_high"], "p_nth": nth}
        low = connection.execute(edge, probe).scalar()
    window = {**params, "p_low": _ROWID_LOW if low is None else low}
    return [dict(row) for row in connection.execute(statement, window).mappings()], low


class SqliteSearch:
    """What search can use in one SQLite file: the indexes its layout has and this process reads."""

    substring_like = "LIKE"
    subtracts_words = True

    def __init__(self, layout: Layout) -> None:
        self.visible = searchable_messages(layout)
        word, trigram = layout.word, layout.trigram
        self.has_word_index = word is not None and word.usable
        self.has_trigram = trigram is not None and trigram.usable
        self.trigram_skips_tool_rows = self.has_trigram and bool(
            trigram is not None and trigram.skips_tool_rows
        )
        self.has_bigrams = layout.bigrams
        self.spells_out_prefixes = bool(word is not None and word.tokenizer in TOKENIZERS)
        self._filter_index = SEARCH_FILTER_INDEX if layout.search_filter else None

    def word_query(self, connection: Connection, items: list[str]) -> str:
        """An FTS5 MATCH expression; a prefix spelled out as the terms under it where exact.

        FTS5 answers ``deploy*`` by merging the doclists of all its terms in
        full before the first row, for each statement of a search;
        ``("deploy" OR "deployed" OR ...)`` matches the same messages and is
        walked lazily. bm25 then scores each term on its own (a rarer form
        weighs more) instead of the prefix as one.
        """
        if not self.spells_out_prefixes:
            return " ".join(items)
        return spell_out(
            items, lambda prefix: terms_under(connection, WORD_INDEX, prefix, PREFIX_TERMS)
        )

    def match_statement(
        self,
        index: str | None,
        like_sql: str | None,
        filtered: tuple[bool, bool, bool],
        anchors: int,
        ranked: bool,
        besides: str | None,
    ) -> TextClause:
        """The statement of one search in this file (see :func:`match_statement`)."""
        return match_statement(
            index,
            like_sql,
            *filtered,
            self.visible,
            anchors,
            ranked,
            None if besides is None or index is None else WORD_INDEX,
            self._filter_index,
        )

    def nth_newest_statement(self, index: str) -> TextClause:
        """FTS5's doclist walk to a rank window's edge (:func:`nth_newest_statement`)."""
        return nth_newest_statement(index)

    def read_window(
        self,
        connection: Connection,
        statement: TextClause,
        edge: TextClause,
        params: dict[str, Any],
        nth: int | None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The edge, then the window (:func:`edge_then_window`)."""
        return edge_then_window(connection, statement, edge, params, nth)

    def substring_indexed(self, needles: Sequence[str]) -> bool:
        """LIKE reads no index here (the trigram and pair indexes are routes of their own)."""
        return False

    def hit_list_statement(self, chars: int) -> None:
        """None: in-process, a prepared statement a hit costs less than assembling one."""
        return None
