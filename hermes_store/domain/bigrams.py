"""The characters of the CJK bigram index (revision 0009), and what a query can ask it.

The index holds, for every message, each distinct pair of adjacent characters
that are both in :data:`RANGES` (Chinese, Japanese kana, Korean hangul, the
supplementary ideographs). Any text that contains such a pair contains it at
one position, so the messages a ``LIKE '%needle%'`` test can match are among
the messages indexed under any one pair of the needle: the index gives a
superset of the matches, the ``LIKE`` test then decides, and recall is that
of the scan.

:data:`RANGES` is frozen with revision 0009, whose triggers test characters
with the GLOB class made from it: changing it means a new revision that
rebuilds the index.
"""

from __future__ import annotations

from hermes_store.domain.query_syntax import OPERATORS, plain_text

RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # hangul jamo
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3130, 0x318F),  # hangul compatibility jamo
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width katakana
    (0x20000, 0x2FA1F),  # supplementary ideographs
)

GLOB_CLASS = "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in RANGES) + "]"
"""One indexed character, as a GLOB bracket expression (GLOB compares code points)."""


def indexed(char: str) -> bool:
    """Whether ``char`` is one of the characters the bigram index pairs."""
    code = ord(char)
    return any(low <= code <= high for low, high in RANGES)


def grams(text: str) -> list[str]:
    """The distinct indexed pairs of ``text``, in order of first appearance."""
    seen: dict[str, None] = {}
    for first, second in zip(text, text[1:], strict=False):
        if indexed(first) and indexed(second):
            seen.setdefault(first + second, None)
    return list(seen)


def branch_grams(items: list[str]) -> list[list[str]] | None:
    """For each ``OR`` branch of sanitized query items, the pairs of the terms it requires.

    A message matching the query matches one branch, so it holds every
    required term of that branch and is indexed under each of their pairs:
    any one pair per branch gives a superset of the matches. None when some
    branch requires no term with a pair (a one-character term, Latin only):
    the index cannot bound that branch, and the search scans.
    """
    branches: list[list[str]] = [[]]
    excluding = False
    for item in items:
        if item == "OR":
            branches.append([])
            excluding = False
        elif item in OPERATORS:
            excluding = excluding or item == "NOT"
        elif not excluding:
            for gram in grams(plain_text(item)):
                if gram not in branches[-1]:
                    branches[-1].append(gram)
    if not all(branches):
        return None
    return branches
