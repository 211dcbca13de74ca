"""Turn what a person types into a query FTS5 accepts.

FTS5 has a grammar of its own: ``"``, ``(``, ``)``, ``+``, ``*``, ``:``,
``^``, ``{``, ``}`` are operators, a bareword may hold only letters, digits,
``_`` and non-ASCII characters, and ``AND``/``OR``/``NOT`` need an operand on
each side. Raw input such as ``C++``, ``"unterminated``, ``chat-send`` or
``hello AND`` is a syntax error. The rules, from the design document:

* balanced ``"phrases"`` are kept; an unmatched quote is dropped;
* operator characters are stripped, a trailing ``*`` (prefix search) is kept;
* a term with inner punctuation is quoted: ``chat-send`` -> ``"chat-send"``,
  ``v1.2`` -> ``"v1.2"`` (FTS5 then matches the tokens as a phrase);
* dangling or repeated boolean operators are removed: ``hello AND`` -> ``hello``.

The result is either an FTS5 query or ``""`` (nothing searchable).
"""

from __future__ import annotations

import re
import unicodedata

OPERATORS = frozenset({"AND", "OR", "NOT"})
_STRIPPED = re.compile(r'[(){}^+*"]')
_BAREWORD = re.compile(r"[A-Za-z0-9_\u0080-\U0010FFFF]+")
_WORDLIKE = re.compile(r"[A-Za-z0-9\u0080-\U0010FFFF]")


def _printable(text: str) -> str:
    """Control characters and lone surrogates become spaces: FTS5 cannot parse them."""
    return "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cs") or ch == "\x1a" else ch for ch in text
    )


def _term(word: str, prefix: bool) -> str | None:
    if not _WORDLIKE.search(word):
        return None
    quoted = word in OPERATORS or word == "NEAR" or not _BAREWORD.fullmatch(word)
    rendered = f'"{word}"' if quoted else word
    return rendered + ("*" if prefix else "")


def _bare_items(chunk: str) -> list[str]:
    """Terms and operators of text outside any phrase."""
    items: list[str] = []
    for raw in chunk.split():
        if raw in OPERATORS:
            items.append(raw)
            continue
        prefix = raw.endswith("*")
        pieces = _STRIPPED.sub(" ", raw).split()
        for index, piece in enumerate(pieces):
            term = _term(piece, prefix and index == len(pieces) - 1)
            if term:
                items.append(term)
    return items


def _tidy_operators(items: list[str]) -> list[str]:
    """Drop operators with nothing on one side, and all but the first of a run."""
    tidy: list[str] = []
    for item in items:
        if item in OPERATORS and (not tidy or tidy[-1] in OPERATORS):
            continue
        tidy.append(item)
    while tidy and tidy[-1] in OPERATORS:
        tidy.pop()
    return tidy


def sanitize_fts5_query(query: str) -> str:
    """The FTS5 query for ``query`` (see the module doc), or ``""``."""
    return " ".join(query_items(query))


def query_items(query: str) -> list[str]:
    """The sanitized query as a list of terms, ``"phrases"`` and operators."""
    text = _printable(query)
    items: list[str] = []
    position = 0
    while position < len(text):
        opening = text.find('"', position)
        closing = text.find('"', opening + 1) if opening >= 0 else -1
        if closing < 0:
            items.extend(_bare_items(text[position:].replace('"', " ")))
            break
        items.extend(_bare_items(text[position:opening]))
        phrase = " ".join(text[opening + 1 : closing].split())
        position = closing + 1
        prefix = position < len(text) and text[position] == "*"
        if _WORDLIKE.search(phrase):
            items.append(f'"{phrase}"' + ("*" if prefix else ""))
    return _tidy_operators(items)
