"""Turn what a person types into a query FTS5 accepts, meaning what was asked.

FTS5 has a grammar of its own: ``"``, ``(``, ``)``, ``+``, ``*``, ``:``,
``^``, ``{``, ``}`` are operators, a bareword may hold only letters, digits,
``_`` and non-ASCII characters, and ``AND``/``OR``/``NOT`` need an operand on
each side. Raw input such as ``C++``, ``"unterminated``, ``chat-send`` or
``hello AND`` is a syntax error. The rules, from the design document:

* balanced ``"phrases"`` are kept; an unmatched quote is dropped;
* operator characters are stripped, a trailing ``*`` (prefix search) is kept;
* a term with inner punctuation is quoted: ``chat-send`` -> ``"chat-send"``,
  ``v1.2`` -> ``"v1.2"`` (FTS5 then matches the tokens as a phrase);
* dangling or repeated boolean operators are removed: ``hello AND`` -> ``hello``;
  of a run of operators the first says AND or OR.

Negation keeps its meaning, since dropping a ``NOT`` turns a query into its
opposite:

* ``a AND NOT b`` is ``a NOT b`` (a NOT anywhere in a run of operators negates);
* ``-term`` (or ``-"a phrase"``) excludes that one term: ``docker -kubernetes``
  is ``docker NOT kubernetes``, ``a -b c`` is ``a c NOT b``;
* FTS5's NOT is binary and binds the run of terms after it (``a NOT b c`` is
  ``a NOT (b c)``); within each OR branch the excluded parts are written after
  everything it asks for, so every NOT has something to exclude from;
* a branch with only excluded parts (``NOT docker``, ``-docker``, the
  ``NOT b`` of ``a OR NOT b``) finds nothing: it is dropped, and a query made
  only of such branches is ``""``. Listing every message without a word is not
  a search, and never are its positives.

The result is either an FTS5 query or ``""`` (nothing searchable).
:func:`query_items` gives it as items (terms, ``"phrases"``, ``AND``, ``OR``,
``NOT``) for the other routes (:mod:`hermes_store.backends.postgresql.tsquery`,
:mod:`hermes_store.domain.substrings`), which rely on its shape: no leading, trailing
or repeated operator, and within an OR branch every ``NOT`` part after all the
positive ones.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

OPERATORS = frozenset({"AND", "OR", "NOT"})
_STRIPPED = re.compile(r'[(){}^+*"]')
# FTS5 barewords: ASCII letters, digits and "_", and every character above U+007F.
# Spelled as the ASCII characters they are not: the same set (tests/search/test_query_syntax.py
# checks every code point), but a class up to U+10FFFF takes re long to compile, paid
# by every process that imports the store (CLI start-up, issue #19).
BAREWORD_CLASS = r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
r"""``[A-Za-z0-9_\u0080-\U0010FFFF]``."""
WORDLIKE_CLASS = r"[^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]"
r"""``[A-Za-z0-9\u0080-\U0010FFFF]``: a bareword character other than ``_``."""
_BAREWORD = re.compile(BAREWORD_CLASS + "+")
_WORDLIKE = re.compile(WORDLIKE_CLASS)


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


@dataclass(frozen=True)
class _Excluded:
    """Terms written ``-like-this``: excluded together, as one NOT part of their own."""

    terms: tuple[str, ...]


_Token = str | _Excluded  # a term or phrase, an operator, or a -term


def _bare_tokens(chunk: str) -> list[_Token]:
    """Terms, operators and -terms of text outside any phrase."""
    tokens: list[_Token] = []
    for raw in chunk.split():
        if raw in OPERATORS:
            tokens.append(raw)
            continue
        excluded = raw.startswith("-")
        prefix = raw.endswith("*")
        pieces = _STRIPPED.sub(" ", raw.lstrip("-") if excluded else raw).split()
        terms = [
            term
            for index, piece in enumerate(pieces)
            if (term := _term(piece, prefix and index == len(pieces) - 1))
        ]
        if excluded and terms:
            tokens.append(_Excluded(tuple(terms)))
        else:
            tokens.extend(terms)
    return tokens


def _dash_before(text: str, opening: int, start: int) -> bool:
    """True when the quote at ``opening`` is the start of ``-"a phrase"``."""
    at = opening - 1
    return at >= start and text[at] == "-" and (at == 0 or text[at - 1].isspace())


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        opening = text.find('"', position)
        closing = text.find('"', opening + 1) if opening >= 0 else -1
        if closing < 0:
            tokens.extend(_bare_tokens(text[position:].replace('"', " ")))
            break
        excluded = _dash_before(text, opening, position)
        tokens.extend(_bare_tokens(text[position : opening - 1 if excluded else opening]))
        phrase = " ".join(text[opening + 1 : closing].split())
        position = closing + 1
        prefix = position < len(text) and text[position] == "*"
        if _WORDLIKE.search(phrase):
            rendered = f'"{phrase}"' + ("*" if prefix else "")
            tokens.append(_Excluded((rendered,)) if excluded else rendered)
    return tokens


@dataclass
class _Branch:
    """One OR branch: what it asks for (with the AND that joined each part) and excludes."""

    wanted: list[str] = field(default_factory=list)
    excluded: list[list[str]] = field(default_factory=list)

    def items(self) -> list[str]:
        if not self.wanted:
            return []  # only exclusions: finds nothing
        result = list(self.wanted)
        for part in self.excluded:
            result += ["NOT", *part]
        return result


def _branches(tokens: list[_Token]) -> list[_Branch]:
    """The tokens as OR branches, operators resolved as the module doc says."""
    branches = [_Branch()]
    run: list[str] | None = None  # the run of terms being read, if any
    operators: list[str] = []  # the operators since the last term
    for token in tokens:
        if isinstance(token, str) and token in OPERATORS:
            operators.append(token)
            run = None
            continue
        branch = branches[-1]
        if operators and operators[0] == "OR":
            branch = _Branch()
            branches.append(branch)
        negated = "NOT" in operators
        joined_by_and = bool(operators) and operators[0] == "AND" and not negated
        operators = []
        if isinstance(token, _Excluded):
            branch.excluded.append(list(token.terms))
            run = None
            continue
        if negated:
            run = [token]
            branch.excluded.append(run)
        elif run is not None:
            run.append(token)
        else:
            if joined_by_and and branch.wanted:
                branch.wanted.append("AND")
            branch.wanted.append(token)
            run = branch.wanted
    return branches


def sanitize_fts5_query(query: str) -> str:
    """The FTS5 query for ``query`` (see the module doc), or ``""``."""
    return " ".join(query_items(query))


def query_items(query: str) -> list[str]:
    """The sanitized query as a list of terms, ``"phrases"`` and operators."""
    items: list[str] = []
    for branch in _branches(_tokens(_printable(query))):
        wanted = branch.items()
        if wanted:
            items += ["OR", *wanted] if items else wanted
    return items


def plain_text(item: str) -> str:
    """A sanitized term or phrase without its quotes and prefix star: the text to find."""
    return item.rstrip("*").strip('"')


def wanted_terms(items: list[str]) -> list[str]:
    """The terms and phrases of :func:`query_items` a match contains (not the excluded ones)."""
    wanted: list[str] = []
    excluding = False
    for item in items:
        if item in OPERATORS:
            excluding = item == "NOT" or (excluding and item != "OR")
        elif not excluding:
            wanted.append(item)
    return wanted
