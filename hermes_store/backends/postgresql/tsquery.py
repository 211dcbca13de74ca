"""Turn sanitized query items into a ``to_tsquery('simple', ...)`` text for PostgreSQL.

The input is :func:`hermes_store.domain.query_syntax.query_items`: terms, ``"phrases"``,
an optional prefix ``*`` and the operators ``AND``/``OR``/``NOT``, already
freed of dangling operators, with every ``NOT`` after something to exclude
from (``-term`` and ``AND NOT`` are already ``NOT`` there). The output keeps
FTS5's meaning:

* ``docker deploy``  -> ``( 'docker' & 'deploy' )`` (implicit AND);
* ``a AND b``        -> ``'a' & 'b'``; ``a OR b`` -> ``'a' | 'b'``;
* ``a NOT b``        -> ``'a' & !'b'`` (FTS5's NOT is binary: a and not b);
* ``"exact phrase"`` -> ``( 'exact' <-> 'phrase' )``;
* ``deploy*``        -> ``'deploy':*``; ``"foo bar"*`` -> ``( 'foo' <-> 'bar':* )``.

Precedence is kept: FTS5 binds a run of adjacent terms (implicit AND) first,
then NOT, AND, OR, so ``a NOT b c`` is ``a NOT (b AND c)``; tsquery binds
``!``, ``<->``, ``&``, ``|``. Runs of terms and phrases are parenthesised, so
``!`` negates the whole run or phrase: ``'a' & !( 'b' & 'c' )``.

Every word goes to PostgreSQL as a quoted lexeme (``'`` doubled, ``\\``
doubled), so no user text is ever read as tsquery syntax. Inside the quotes
PostgreSQL runs its parser, which keeps ``v1.2`` whole and reads ``chat-send``
as the compound and its parts; a punctuated word is also offered cut into
FTS5's pieces (``( 'chat-send' | 'chat' <-> 'send' )``). The stored vector
holds the pieces alone (its text's punctuation is cut before parsing, see
:mod:`.word_index`), so the pieces find the word, written with its
punctuation or apart, as FTS5 does; the whole reading matches no vector, but
``ts_headline`` parses the untouched text and marks the word by it. A word
PostgreSQL finds no lexeme in (an emoji, say) is dropped by PostgreSQL with a
notice, as FTS5 drops it.
"""

from __future__ import annotations

import unicodedata

from hermes_store.domain.query_syntax import OPERATORS

_OPERATOR_TEXT = {"AND": "&", "OR": "|", "NOT": "&"}


def quote_lexeme(word: str) -> str:
    """``word`` as a tsquery quoted value: nothing in it can act as an operator."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def unicode61_pieces(word: str) -> list[str]:
    """``word`` cut where FTS5's unicode61 tokenizer cuts it: letters, numbers, Co."""
    pieces: list[str] = []
    current: list[str] = []
    for ch in word:
        category = unicodedata.category(ch)
        if category[0] in "LN" or category == "Co":
            current.append(ch)
        elif current:
            pieces.append("".join(current))
            current = []
    if current:
        pieces.append("".join(current))
    return pieces


def _word(word: str, prefix: bool) -> str:
    """One word: PostgreSQL's reading of it, or else FTS5's (for punctuated words).

    PostgreSQL keeps ``v1.2`` or ``state.db`` whole and reads ``chat-send`` as
    the compound plus its parts; FTS5 reads all of them as a phrase of their
    pieces, which also matches ``chat send`` written apart. Offering both
    readings finds what either finds.
    """
    star = ":*" if prefix else ""
    whole = quote_lexeme(word) + star
    pieces = unicode61_pieces(word)
    if not pieces or pieces == [word]:
        return whole
    split = " <-> ".join(quote_lexeme(piece) for piece in pieces) + star
    return f"( {whole} | {split} )"


def _operand(item: str) -> str:
    """One term or phrase of the sanitized query as a tsquery operand."""
    prefix = item.endswith("*")
    body = item[:-1] if prefix else item
    if len(body) >= 2 and body.startswith('"') and body.endswith('"'):
        body = body[1:-1]
    words = body.split()
    rendered = [_word(word, prefix and at == len(words) - 1) for at, word in enumerate(words)]
    if len(rendered) == 1:
        return rendered[0]
    return "( " + " <-> ".join(rendered) + " )"


def _groups(items: list[str]) -> list[list[str] | str]:
    """Runs of adjacent terms (FTS5's implicit AND) as lists, between the operators."""
    groups: list[list[str] | str] = []
    for item in items:
        if item in OPERATORS:
            groups.append(item)
        elif groups and isinstance(groups[-1], list):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def tsquery_text(items: list[str]) -> str:
    """The ``to_tsquery`` text for sanitized query items; ``""`` for no items."""
    parts: list[str] = []
    negate = False
    for group in _groups(items):
        if isinstance(group, str):
            parts.append(_OPERATOR_TEXT[group])  # NOT: "a NOT b" is "a & !b"
            negate = group == "NOT"
            continue
        operands = [_operand(item) for item in group]
        joined = operands[0] if len(operands) == 1 else "( " + " & ".join(operands) + " )"
        parts.append(("!" if negate else "") + joined)
        negate = False
    return " ".join(parts)
