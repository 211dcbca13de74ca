"""The bareword classes of :mod:`hermes_store.domain.query_syntax` are the sets they name.

They are spelled as the ASCII characters they exclude (a class up to U+10FFFF
is slow to compile at import); this holds the spelling to the plain ranges,
over every code point.
"""

from __future__ import annotations

import re

from hermes_store.domain.query_syntax import BAREWORD_CLASS, WORDLIKE_CLASS


def _differences(fast: str, plain: str) -> list[str]:
    quick, reference = re.compile(fast), re.compile(plain)
    return [
        f"U+{point:04X}"
        for point in range(0x110000)
        if bool(quick.match(chr(point))) != bool(reference.match(chr(point)))
    ]


def test_bareword_class_is_ascii_word_characters_and_everything_above_ascii() -> None:
    assert _differences(BAREWORD_CLASS, r"[A-Za-z0-9_\u0080-\U0010FFFF]") == []


def test_wordlike_class_is_the_same_without_the_underscore() -> None:
    assert _differences(WORDLIKE_CLASS, r"[A-Za-z0-9\u0080-\U0010FFFF]") == []


def test_the_check_can_fail() -> None:
    assert _differences(BAREWORD_CLASS, r"[A-Za-z0-9\u0080-\U0010FFFF]") == ["U+005F"]
