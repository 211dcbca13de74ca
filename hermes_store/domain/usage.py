"""A usage report: the tokens and costs one model call adds to (or sets on) a session.

The old class's ``update_token_counts`` takes sixteen keyword arguments; a
:class:`UsageReport` holds them once, built by the facade, so the repository
and the asyncio twin pass one value instead of repeating the list.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_COUNTERS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The counters a report adds to; they only grow."""
COST_FIELDS = ("estimated_cost_usd", "actual_cost_usd")
COST_LABELS = ("cost_status", "cost_source", "pricing_version")
"""What the latest usage report says about the cost: given values replace the stored ones."""
ROUTE_LABELS = ("billing_provider", "billing_base_url", "billing_mode")
"""Where the session is billed: filled in once, then kept, like ``model`` (the old class's
``COALESCE(billing_provider, ?)``): one row cannot stand for usage on several providers."""
BILLING_LABELS = COST_LABELS + ROUTE_LABELS


@dataclass(frozen=True, slots=True)
class UsageReport:
    """What one call used and cost; checked by the repository that records it.

    Field by field the arguments of ``update_token_counts`` but ``absolute``,
    which says how a report is applied, not what it holds.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_cost_usd: float | None = None
    actual_cost_usd: float | None = None
    cost_status: str | None = None
    cost_source: str | None = None
    pricing_version: str | None = None
    billing_provider: str | None = None
    billing_base_url: str | None = None
    billing_mode: str | None = None
