"""Search for text the unicode61 tokenizer cannot split: Chinese, Japanese, Korean.

unicode61 makes one token of a whole run of CJK characters (and of Latin
letters glued to it: ``修改youer服务端的计划`` is a single token), so a word
inside such a run is invisible to it. The trigram index (revision 0007)
matches any substring of three or more characters. Terms shorter than three
characters -- most two-character Chinese words, most Korean words -- match
nothing in a trigram index, so such queries become ``LIKE '%term%'`` tests
over the content table: a scan, but an exact one.

Both routes take the items of :func:`hermes_store.domain.query_syntax.query_items`
(terms, phrases, AND/OR/NOT), so the query syntax is the same everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hermes_store.domain.bigrams import GLOB_CLASS
from hermes_store.domain.query_syntax import OPERATORS, plain_text, wanted_terms

_CJK = re.compile(GLOB_CLASS)  # the characters the pair index holds route to substrings
TRIGRAM = 3
SNIPPET_RADIUS = 30


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


@dataclass(frozen=True)
class SubstringQuery:
    """A query answered by substring matching, in one of two forms."""

    fts: str | None
    """A trigram MATCH expression, when every term is long enough for the index."""
    like_sql: str | None
    """Otherwise a boolean SQL expression of ``content LIKE :pN`` tests..."""
    like_params: dict[str, str]
    """...and its parameters."""
    needles: list[str]
    """The substrings a match contains (not the excluded ones), longest first, for snippets."""
    ranked: bool = False
    """``fts`` is ranked by bm25 (in windows); False: its matches come newest first.

    bm25 first counts, for every term of the query, the messages that contain
    it anywhere in the index. A CJK term's trigrams are rare enough for that
    to be cheap; a Latin term's are in a large share of all messages (design
    notes, "Search at field size"), so a
    trigram query with any term that has no CJK character comes newest first,
    as the ``LIKE`` route always does.
    """


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def substring_query(
    items: list[str], column: str = "m.content", *, trigram: bool = True, like: str = "LIKE"
) -> SubstringQuery | None:
    """The substring form of sanitized query items, or None when nothing is searchable.

    ``trigram=False`` always gives the ``like`` form (PostgreSQL, which has no
    FTS5 trigram table and passes ``like="ILIKE"``: its pg_trgm index serves
    ILIKE directly).
    """
    needles = [plain_text(item) for item in items if item not in OPERATORS]
    needles = [n for n in needles if n.strip()]
    wanted = [n for n in map(plain_text, wanted_terms(items)) if n.strip()]
    if not wanted:
        return None
    ordered = sorted(set(wanted), key=len, reverse=True)
    if trigram and all(len(n) >= TRIGRAM for n in needles):
        terms = [item if item in OPERATORS else f'"{plain_text(item)}"' for item in items]
        ranked = all(has_cjk(needle) for needle in needles)
        return SubstringQuery(" ".join(terms), None, {}, ordered, ranked)
    parts: list[str] = []
    params: dict[str, str] = {}
    run: list[str] = []  # adjacent terms: FTS5's implicit AND, bound before NOT/AND/OR

    def close_run() -> None:
        if run:
            parts.append(run[0] if len(run) == 1 else "(" + " AND ".join(run) + ")")
            run.clear()

    for item in items:
        if item in OPERATORS:
            close_run()
            parts.append("AND NOT" if item == "NOT" else item)
            continue
        name = f"p_like{len(params)}"
        params[name] = f"%{_escape_like(plain_text(item))}%"
        run.append(f"{column} {like} :{name} ESCAPE '\\'")
    close_run()
    return SubstringQuery(None, "(" + " ".join(parts) + ")", params, ordered)


def make_snippet(content: str | None, needles: list[str]) -> str:
    """A ``>>>match<<<`` window around the first needle found, like FTS5's snippet()."""
    text = content or ""
    folded = text.casefold()
    for needle in needles:
        at = folded.find(needle.casefold())
        if at < 0:
            continue
        end = at + len(needle)
        start, stop = max(0, at - SNIPPET_RADIUS), min(len(text), end + SNIPPET_RADIUS)
        return (
            ("..." if start > 0 else "")
            + f"{text[start:at]}>>>{text[at:end]}<<<{text[end:stop]}"
            + ("..." if stop < len(text) else "")
        )
    return text[: 2 * SNIPPET_RADIUS]
