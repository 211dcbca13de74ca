"""Usage reports: the token and cost counters of a session and the reports over them."""

from __future__ import annotations

import math
import sys
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Text,
    case,
    cast,
    func,
)

from hermes_store.domain.arguments import (
    INT64_MAX,
    int_arg,
    number_arg,
    text_arg,
)
from hermes_store.domain.records import ModelUsage, TopSession
from hermes_store.domain.usage import (
    BILLING_LABELS,
    COST_FIELDS,
    COST_LABELS,
    ROUTE_LABELS,
    TOKEN_COUNTERS,
    UsageReport,
)
from hermes_store.errors import InvalidInputError, SessionNotFoundError
from hermes_store.repositories.session_base import (
    S,
    SessionBase,
    param,
    update_by_id,
)
from hermes_store.schema.tables import FLOAT


def _add_if_given(name: str) -> Any:
    """A cost that stays NULL until known; adding an unknown (None) one leaves it as it is."""
    # A CAST, because PostgreSQL cannot type a bare ``$n IS NULL`` parameter.
    given = cast(param(name), FLOAT)
    return case((given.is_(None), S.c[name]), else_=func.coalesce(S.c[name], 0) + given)


# The usage report, as the old class wrote it: the estimated cost counts a missing figure
# as 0 (so it is a number once any usage was recorded), the actual cost only changes when
# given, cost labels follow the latest report, the model and the route the first one.
_LABELS = {
    "model": func.coalesce(S.c.model, param("model", Text)),
    **{name: func.coalesce(param(name, Text), S.c[name]) for name in COST_LABELS},
    **{name: func.coalesce(S.c[name], param(name, Text)) for name in ROUTE_LABELS},
}


def _fits_after_adding(name: str) -> Any:
    """The sum stays a 64-bit integer: the stored value is at most ``INT64_MAX - increment``.

    The room is computed in Python, so the test itself cannot overflow; SQLite
    would otherwise turn a sum past 64 bits into a REAL, silently.
    """
    return func.coalesce(S.c[name], 0) <= param(f"{name}_room", BigInteger)


def _finite_after_adding(name: str) -> Any:
    """The sum stays finite (SQLite would store inf; PostgreSQL refuses an overflow itself)."""
    given = cast(param(name), FLOAT)
    return given.is_(None) | (
        func.coalesce(S.c[name], 0) + given <= cast(param("float_max"), FLOAT)
    )


_ADD_USAGE = (
    update_by_id()
    .where(
        *(_fits_after_adding(name) for name in TOKEN_COUNTERS),
        *(_finite_after_adding(name) for name in COST_FIELDS),
    )
    .values(
        **{name: func.coalesce(S.c[name], 0) + param(name, Integer) for name in TOKEN_COUNTERS},
        estimated_cost_usd=func.coalesce(S.c.estimated_cost_usd, 0)
        + func.coalesce(param("estimated_cost_usd", FLOAT), 0),
        actual_cost_usd=_add_if_given("actual_cost_usd"),
        **_LABELS,
    )
)

_SET_USAGE = update_by_id().values(
    **{name: param(name, Integer) for name in TOKEN_COUNTERS},
    estimated_cost_usd=func.coalesce(param("estimated_cost_usd", FLOAT), 0),
    actual_cost_usd=func.coalesce(param("actual_cost_usd", FLOAT), S.c.actual_cost_usd),
    **_LABELS,
)


def _overflow(stored: dict[str, Any], usage: dict[str, Any]) -> InvalidInputError:
    """Which counter the refused increment would have broken, in the caller's terms."""
    for name in TOKEN_COUNTERS:
        if (stored[name] or 0) > INT64_MAX - usage[name]:
            return InvalidInputError(
                f"{name}: {stored[name]} + {usage[name]} is past {INT64_MAX}, the largest "
                "integer the store holds; nothing was written"
            )
    for name in COST_FIELDS:
        if usage[name] is not None and not math.isfinite((stored[name] or 0.0) + usage[name]):
            return InvalidInputError(
                f"{name}: {stored[name]} + {usage[name]} is not a finite number; "
                "nothing was written"
            )
    return InvalidInputError("a counter would overflow; nothing was written")


class SessionUsage(SessionBase):
    """Usage of sessions: recorded per report, summed per model, ranked by tokens."""

    def record_usage(self, session_id: str, usage: UsageReport, *, absolute: bool = False) -> None:
        """Add a usage report to the token and cost counters, or set them (``absolute``).

        As the old class: ``model`` and the route (``billing_provider``,
        ``billing_base_url``, ``billing_mode``) fill in a session that had
        none and are kept after that; the cost labels (status, source,
        pricing version) replace the stored ones when given. An
        ``estimated_cost_usd`` of None counts as 0 (so a session with
        recorded usage always has a number there); an ``actual_cost_usd`` of
        None keeps the stored value. Counts and costs are not negative; a sum
        that would leave 64 bits or stop being finite changes nothing and is
        InvalidInputError naming the counter. An unknown session is
        SessionNotFoundError.
        """
        text_arg("session_id", session_id)
        if not isinstance(usage, UsageReport):
            raise InvalidInputError(f"usage must be a UsageReport, got {type(usage).__name__}")
        checked: dict[str, Any] = {"model": text_arg("model", usage.model, optional=True)}
        # Counters only grow: a negative increment would make them disagree with the usage.
        for name in TOKEN_COUNTERS:
            checked[name] = int_arg(name, getattr(usage, name), minimum=0)
        for name in COST_FIELDS:
            checked[name] = number_arg(name, getattr(usage, name), optional=True, minimum=0.0)
        for name in BILLING_LABELS:
            checked[name] = text_arg(name, getattr(usage, name), optional=True)
        if not isinstance(absolute, bool):
            raise InvalidInputError(f"absolute must be a bool, got {type(absolute).__name__}")
        params = {f"p_{name}": value for name, value in checked.items()}
        params["p_id"] = session_id
        if absolute:
            self._require(self._changed(_SET_USAGE, params), session_id)
            return
        for name in TOKEN_COUNTERS:
            params[f"p_{name}_room"] = INT64_MAX - checked[name]
        params["p_float_max"] = sys.float_info.max
        if self._changed(_ADD_USAGE, params):
            return
        stored = self._r.get.first(self._c, {"p_id": session_id})
        if stored is None:
            raise SessionNotFoundError(session_id)
        raise _overflow(stored, checked)

    def token_usage_by_model(self) -> list[ModelUsage]:
        """Token and cost totals per model, the costliest first (the document's query).

        Read from the kept totals where the backend trusts them (the same rows;
        a cost may differ from ``SUM``'s in its last bits, see
        :mod:`hermes_store.schema.totals`), else aggregated from ``sessions``.
        """
        kept = self._backend.kept_usage(self._c) if self._kept_totals() else None
        if kept is not None:
            return [ModelUsage(**row) for row in kept]
        return [ModelUsage(**row) for row in self._rows(self._r.tokens_by_model, {})]

    def _kept_totals(self) -> bool:
        """Whether this store may hold kept totals (the backend then says if they are trusted)."""
        return self._layout.kept_totals and self._backend.keeps_totals

    def top_by_tokens(self, limit: int = 10) -> list[TopSession]:
        """The sessions with the most input + output tokens (the document's query)."""
        limit = int_arg("limit", limit, minimum=0)
        return [TopSession(**row) for row in self._rows(self._r.top_by_tokens, {"p_limit": limit})]
