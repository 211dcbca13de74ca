"""Argument checks shared by the facade: reject early, name the argument, write nothing.

SQLite would accept almost anything (it is dynamically typed), so without
these checks a wrong type is stored silently and surfaces much later. A lone
surrogate (UTF-8 cannot store it) is replaced by U+FFFD in texts and refused
in the names of sessions (:data:`KEYS`), with a log line either way.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any, Literal, overload

from hermes_store.errors import InvalidInputError

_log = logging.getLogger(__name__)


@overload
def text_arg(
    name: str, value: Any, *, optional: Literal[False] = False, non_empty: bool = False
) -> str: ...
@overload
def text_arg(name: str, value: Any, *, optional: bool, non_empty: bool = False) -> str | None: ...
def text_arg(
    name: str, value: Any, *, optional: bool = False, non_empty: bool = False
) -> str | None:
    """``value`` if it is a str storable as UTF-8 (or None when ``optional``)."""
    if value is None:
        if optional:
            return None
        raise InvalidInputError(f"{name} is required, got None")
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if non_empty and not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    if value.isascii():  # O(1) in CPython: ASCII holds no surrogate, skip the encoding copy
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        if name.partition("[")[0] in KEYS:
            raise InvalidInputError(
                f"{name} is not valid Unicode text (lone surrogate at position {error.start})"
            ) from None
        return replace_surrogates(name, value)
    return value


KEYS = frozenset(
    {
        "session_id",
        "parent_session_id",
        "session_id_or_prefix",
        "id",
        "source",
        "source_filter",
        "exclude_sources",
        "sessions.id",
        "sessions.parent_session_id",
        "sessions.source",
        "messages.session_id",
    }
)
"""Arguments that name a session (its id, its parent, its source): a lone surrogate is refused.

Two different names must never become one, so a key is not mended; the
agent makes these itself and never from scraped text.
"""

_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(name: str, value: str) -> str:
    """``value`` with each lone surrogate as U+FFFD, and a log line saying so.

    Text that tools scrape from web pages carries lone surrogates, which UTF-8
    cannot store; refusing the message made the agent's caller drop the whole
    turn (and stop saving the session), so the text is kept with U+FFFD in
    their place instead.
    """
    replaced, count = _SURROGATE.subn("\ufffd", value)
    _log.warning(
        "%s held %d lone surrogate(s), which UTF-8 cannot store: kept with U+FFFD in their place",
        name,
        count,
    )
    return replaced


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""SQLite's integers (and PostgreSQL's BIGINT, which LIMIT and OFFSET take) are 64-bit."""


@overload
def int_arg(
    name: str, value: Any, *, optional: Literal[False] = False, minimum: int | None = None
) -> int: ...
@overload
def int_arg(name: str, value: Any, *, optional: bool, minimum: int | None = None) -> int | None: ...
def int_arg(
    name: str, value: Any, *, optional: bool = False, minimum: int | None = None
) -> int | None:
    """``value`` if it is an int the database can hold (bool is refused: True is not a count)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name} must be an integer, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum}, got {value}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInputError(f"{name} must fit in 64 bits (at most {INT64_MAX}), got {value}")
    return value


@overload
def number_arg(
    name: str, value: Any, *, optional: Literal[False] = False, minimum: float | None = None
) -> float: ...
@overload
def number_arg(
    name: str, value: Any, *, optional: bool, minimum: float | None = None
) -> float | None: ...
def number_arg(
    name: str, value: Any, *, optional: bool = False, minimum: float | None = None
) -> float | None:
    """``value`` as a finite float (an int too large for a float is refused, not an overflow)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        magnitude = int(int(value).bit_length() * math.log10(2))  # only an int overflows
        raise InvalidInputError(
            f"{name} is too large for a float (about 10**{magnitude})"
        ) from None
    if not math.isfinite(number):
        raise InvalidInputError(f"{name} must be a finite number, got {value}")
    if minimum is not None and number < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum:g}, got {value}")
    return number


_JSON = json.JSONEncoder(allow_nan=False)
"""One encoder for every call: ``json.dumps(..., allow_nan=False)`` builds a new one each time."""


def json_arg(name: str, value: Any) -> str | None:
    """The JSON text stored for ``value``; empty values are stored as NULL, as before."""
    if not value:
        return None
    try:
        encoded = _JSON.encode(value)
        if "\\ud" in encoded:  # a surrogate escape: a pair (non-BMP), or a lone one
            encoded = _without_lone_surrogates(name, value, encoded)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{name} is not JSON-serializable: {error}") from None
    except RecursionError:
        raise InvalidInputError(
            f"{name} is nested too deeply to store as JSON (Python's recursion limit)"
        ) from None
    return text_arg(name, encoded)


_JSON_RAW = json.JSONEncoder(allow_nan=False, ensure_ascii=False)


def _without_lone_surrogates(name: str, value: Any, encoded: str) -> str:
    """``encoded`` again with each lone surrogate of ``value``'s strings as U+FFFD.

    The ASCII encoding escapes a lone surrogate (``\\ud800``) as it escapes a
    pair, so it is storable, but reads back as a string no UTF-8 writer
    accepts: the caller's next step (a request, a file) fails instead.
    """
    raw = _JSON_RAW.encode(value)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return _JSON.encode(json.loads(replace_surrogates(name, raw)))
    return encoded


def names_arg(name: str, value: Any) -> list[str] | None:
    """A filter list: None, one string, or a sequence of strings."""
    if value is None:
        return None
    if isinstance(value, str):
        return [text_arg(name, value)]
    if not isinstance(value, Sequence | set | frozenset):
        raise InvalidInputError(f"{name} must be a list of strings, got {type(value).__name__}")
    return [text_arg(f"{name}[{i}]", item) for i, item in enumerate(value)]


def decode_json(raw: str | None) -> Any:
    """Stored JSON back to Python; text that is not JSON is returned as it is.

    So is JSON nested past Python's recursion limit, which another program
    may have written: the caller gets the text, not a RecursionError.
    """
    if not raw:
        return raw
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return raw


def bool_arg(name: str, value: Any) -> bool:
    """A flag must be a bool: "no" or 0 meaning True by truthiness would be a silent surprise."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be a bool, got {type(value).__name__}")
    return value
