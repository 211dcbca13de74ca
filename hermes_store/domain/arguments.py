"""Argument checks shared by the facade: reject early, name the argument, write nothing.

SQLite would accept almost anything (it is dynamically typed), so without
these checks a wrong type is stored silently and surfaces much later; a lone
surrogate fails deep inside the driver with a message naming no argument.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal, overload

from hermes_store.errors import InvalidInputError


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
        raise InvalidInputError(
            f"{name} is not valid Unicode text (lone surrogate at position {error.start})"
        ) from None
    return value


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
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"{name} is not JSON-serializable: {error}") from None
    except RecursionError:
        raise InvalidInputError(
            f"{name} is nested too deeply to store as JSON (Python's recursion limit)"
        ) from None
    return text_arg(name, encoded)


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
