"""The optional filters of a search statement, shared by the SQLite and PostgreSQL forms.

Each combination of filters is its own prebuilt statement (an ``IN`` list is
an expanding parameter), so the filter text and its parameters are made in
one place and both dialects' statement builders splice them in.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.sql.elements import BindParameter


def filter_sql(
    sources: bool, excluded: bool, roles: bool, messages: str = "m"
) -> tuple[str, list[BindParameter[Any]]]:
    """(``AND ...`` conditions on ``s.source``/``m.role``, their expanding parameters).

    ``messages`` is the alias whose ``role`` is tested: an index of roles
    rather than the rows, where a statement has one (see
    :func:`hermes_store.backends.sqlite.search.match_statement`).
    """
    conditions: list[str] = []
    expanding: list[BindParameter[Any]] = []
    if sources:
        conditions.append("AND s.source IN :p_sources")
        expanding.append(bindparam("p_sources", expanding=True))
    if excluded:
        conditions.append("AND s.source NOT IN :p_excluded")
        expanding.append(bindparam("p_excluded", expanding=True))
    if roles:
        conditions.append(f"AND {messages}.role IN :p_roles")
        expanding.append(bindparam("p_roles", expanding=True))
    return " ".join(conditions), expanding
