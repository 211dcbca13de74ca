"""Session titles: cleaning, and the "Title #N" numbering of a lineage.

When context compression splits a session, the continuation is titled
``"<title> #2"``, then ``#3``; resolving a title must find the newest link.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hermes_store.domain.arguments import text_arg
from hermes_store.errors import InvalidInputError

MAX_TITLE_LENGTH = 100

# C0 and C1 controls except \t \n \r (those fold into spaces below); C1's
# U+009B is a terminal escape just like ESC.
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Zero-width characters, direction overrides, BOM, object replacement,
# interlinear annotation: invisible, and used to make look-alike titles.
_INVISIBLE = re.compile(r"[\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffc]")
_WHITESPACE = re.compile(r"\s+")
_NUMBERED = re.compile(r"^(.*?) #(\d+)$")


def clean_title(title: str | None) -> str | None:
    """The stored form of ``title``: None for empty, ValueError when too long."""
    if title is None:
        return None
    if not isinstance(title, str):
        raise InvalidInputError(f"title must be a string, got {type(title).__name__}")
    cleaned = _INVISIBLE.sub("", _ASCII_CONTROLS.sub("", title))
    cleaned = _WHITESPACE.sub(" ", cleaned).strip()
    if not cleaned:
        return None
    if not cleaned.isascii():
        cleaned = text_arg("title", cleaned)  # a lone surrogate becomes U+FFFD
    if len(cleaned) > MAX_TITLE_LENGTH:
        raise InvalidInputError(
            f"title too long ({len(cleaned)} characters, max {MAX_TITLE_LENGTH})"
        )
    return cleaned


def lineage_base(title: str) -> str:
    """``"Fix build #3"`` -> ``"Fix build"``; a title without a number is its own base."""
    match = _NUMBERED.match(title)
    return match.group(1) if match else title


def lineage_number(title: str, base: str) -> int | None:
    """1 for the base itself, N for ``"base #N"``, None for any other title."""
    if title == base:
        return 1
    # The common case without the regex (whose lazy group backtracks over long titles):
    # "base #" and then only decimal digits, which is what \d+ and int() take.
    prefix = f"{base} #"
    if title.startswith(prefix) and title[len(prefix) :].isdecimal():
        return int(title[len(prefix) :])
    match = _NUMBERED.match(title)
    if match and match.group(1) == base:
        return int(match.group(2))
    return None


def next_in_lineage(base: str, existing: Iterable[str]) -> str:
    numbers = [n for n in (lineage_number(t, base) for t in existing) if n is not None]
    if not numbers:
        return base
    return f"{base} #{max(numbers) + 1}"
