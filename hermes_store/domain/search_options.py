"""What a search may be asked beyond its query: an order, the fields wanted, a length cap.

The agent's dashboards sort a search box's hits by time and show a few
fields of each; people paste whole log files into that box. The rules here
need no database:

* ``sort``: ``"relevance"`` (best first, the default), ``"newest"`` or
  ``"oldest"``; a time order sorts the best :data:`SORT_WINDOW` matches by
  their time (then id), so it costs one ranked read whatever the store holds;
* ``fields``: the keys of a hit to return, from :data:`HIT_FIELDS`; without
  ``"context"`` the two neighbour reads per hit are skipped;
* a query longer than :data:`MAX_QUERY_CHARS` is cut at the last blank before
  the cap (mid-word only when there is none), not refused: search input
  comes straight from people, and nothing useful is lost that far in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_store.domain.records import SearchHit
from hermes_store.errors import InvalidInputError

SORTS = ("relevance", "newest", "oldest")
SORT_WINDOW = 1000
"""How many of the best matches a time order sorts."""
MAX_QUERY_CHARS = 1000
"""Longer queries are cut to this many characters."""
HIT_FIELDS = SearchHit.field_names()
"""Every key a hit has (``context`` included), in the order a hit lists them."""


def sort_arg(sort: Any) -> str:
    """``sort`` checked: one of :data:`SORTS`."""
    if not isinstance(sort, str) or sort not in SORTS:
        raise InvalidInputError(f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    return sort


def fields_arg(fields: Any) -> tuple[str, ...] | None:
    """``fields`` checked: None (every key) or a non-empty sequence of :data:`HIT_FIELDS`."""
    if fields is None:
        return None
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
        raise InvalidInputError(
            f"fields must be a non-empty list of hit keys, got {type(fields).__name__}"
        )
    unknown = [name for name in fields if name not in HIT_FIELDS]
    if unknown:
        raise InvalidInputError(
            f"unknown hit fields {unknown!r}; a hit has {', '.join(HIT_FIELDS)}"
        )
    return tuple(dict.fromkeys(fields))


def capped_query(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS`, at the last blank before the cap if any."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    cut = query[:MAX_QUERY_CHARS]
    blank = max(cut.rfind(" "), cut.rfind("\t"), cut.rfind("\n"))
    return cut[:blank] if blank > 0 else cut


def time_ordered(matches: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """``matches`` by time (then id), newest or oldest first."""
    return sorted(
        matches, key=lambda match: (match["timestamp"], match["id"]), reverse=sort == "newest"
    )
