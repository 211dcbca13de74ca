"""Turn sanitized query items into a ``to_tsquery('simple', ...)`` text for PostgreSQL.

The input is :func:`hermes_store.fts_query.query_items`: terms, ``"phrases"``,
an optional prefix ``*`` and the operators ``AND``/``OR``/``NOT``, already
freed of dangling operators. The output keeps FTS5's meaning:

* ``docker deploy``  -> ``'docker' & 'deploy'`` (implicit AND);
* ``a AND b``        -> ``'a' & 'b'``; ``a OR b`` -> ``'a' | 'b'``;
* ``a NOT b``        -> ``'a' & !'b'`` (FTS5's NOT is binary: a and not b);
* ``"exact phrase"`` -> ``( 'exact' <-> 'phrase' )``;
* ``deploy*``        -> ``'deploy':*``; ``"foo bar"*`` -> ``( 'foo' <-> 'bar':* )``.

Precedence agrees: FTS5 binds NOT, then AND, then OR; tsquery binds ``!``,
``<->``, ``&``, ``|``. Phrases are parenthesised so ``!`` negates the whole
phrase.

Every word goes to PostgreSQL as a quoted lexeme (``'`` doubled, ``\\``
doubled), so no user text is ever read as tsquery syntax. Inside the quotes
PostgreSQL runs the same parser as ``to_tsvector('simple', content)``, so a
word such as ``chat-send`` or ``v1.2`` is split (or kept whole) exactly as it
was when the content was indexed. A word PostgreSQL finds no lexeme in (an
emoji, say) is dropped by PostgreSQL with a notice, as FTS5 drops it.
"""

from __future__ import annotations

from .fts_query import OPERATORS

_OPERATOR_TEXT = {"AND": "&", "OR": "|", "NOT": "& !"}


def quote_lexeme(word: str) -> str:
    """``word`` as a tsquery quoted value: nothing in it can act as an operator."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _operand(item: str) -> str:
    """One term or phrase of the sanitized query as a tsquery operand."""
    prefix = item.endswith("*")
    body = item[:-1] if prefix else item
    if len(body) >= 2 and body.startswith('"') and body.endswith('"'):
        body = body[1:-1]
    words = [quote_lexeme(word) for word in body.split()]
    if prefix:
        words[-1] += ":*"
    if len(words) == 1:
        return words[0]
    return "( " + " <-> ".join(words) + " )"


def tsquery_text(items: list[str]) -> str:
    """The ``to_tsquery`` text for sanitized query items; ``""`` for no items."""
    parts: list[str] = []
    previous_was_operand = False
    for item in items:
        if item in OPERATORS:
            parts.append(_OPERATOR_TEXT[item])
            previous_was_operand = False
            continue
        if previous_was_operand:
            parts.append("&")  # adjacent terms: implicit AND, as in FTS5
        parts.append(_operand(item))
        previous_was_operand = True
    return " ".join(parts)
