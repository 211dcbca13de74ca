"""Prefix terms of a sanitized query spelled out as the words they stand for.

FTS5 without a ``prefix=`` index answers ``deploy*`` by merging the doclists of
every indexed term that starts with ``deploy`` before it returns a row; the
``OR`` of those terms has the same matches and is walked lazily, newest rowid
first. Spelling a prefix out is exact only when the index would fold and cut
the prefix as we do: a bareword of ASCII letters and digits, which the
``unicode61`` and ``ascii`` tokenizers keep whole and only lower-case.

FTS5's grammar joins only phrases by juxtaposition (``a b`` is an implicit
AND of the run), and a run binds tighter than any operator (``a NOT b c`` is
``a NOT (b c)``). A group ``(x OR y)`` is no phrase, so a run that gets one is
written as the explicit AND of its parts in parentheses: the same node of
the expression, in the grammar's other spelling.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hermes_store.domain.query_syntax import OPERATORS

_EXPANDABLE = re.compile(r"[A-Za-z0-9]+\*")
TOKENIZERS = frozenset({"unicode61", "ascii"})
"""Tokenizers that fold an ASCII bareword to its lower case and nothing else."""

TermsUnder = Callable[[str], list[str] | None]
"""The index's terms under an indexed prefix; None (or none at all) keeps the prefix."""


def expandable_prefix(item: str) -> str | None:
    """The indexed form of a prefix item (``Deploy*`` -> ``deploy``), or None if it has none."""
    if not _EXPANDABLE.fullmatch(item):
        return None
    return item[:-1].lower()


def _group(terms: list[str]) -> str:
    """``("t1" OR "t2" ...)``: each term quoted, so FTS5 reads it back as that one token
    (a term is the tokenizer's output; quoting keeps ``or``/``not`` mere text)."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    return quoted[0] if len(quoted) == 1 else "(" + " OR ".join(quoted) + ")"


def spell_out(items: list[str], terms_under: TermsUnder) -> str:
    """The FTS5 query of sanitized ``items``, each expandable prefix as its terms' ``OR``."""
    out: list[str] = []
    run: list[str] = []
    grouped = False

    def close_run() -> None:
        nonlocal grouped
        if run:
            out.append("(" + " AND ".join(run) + ")" if grouped and len(run) > 1 else " ".join(run))
        run.clear()
        grouped = False

    for item in items:
        if item in OPERATORS:
            close_run()
            out.append(item)
            continue
        prefix = expandable_prefix(item)
        terms = terms_under(prefix) if prefix is not None else None
        if terms:
            run.append(_group(terms))
            grouped = True
        else:
            run.append(item)
    close_run()
    return " ".join(out)
