"""Session titles: unique, cleaned, and numbered in lineages ("T", "T #2", ...)."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from hermes_store.backends.base import Backend
from hermes_store.backends.prepared import Prepared
from hermes_store.domain.arguments import (
    text_arg,
)
from hermes_store.domain.records import SessionRecord
from hermes_store.domain.titles import clean_title, lineage_base, lineage_number, next_in_lineage
from hermes_store.errors import TitleConflictError
from hermes_store.repositories.session_base import (
    SessionBase,
    in_layout,
    param,
    update_by_id,
)

_SET_TITLE = update_by_id().values(title=param("title"))


class SessionTitles(SessionBase):
    """Titles of sessions: set, looked up, and the lineage of a title."""

    def set_title(self, session_id: str, title: str | None) -> bool:
        """Set (or, with an empty title, clear) a title; False if the session is unknown.

        The title is cleaned (control characters out, whitespace folded, at
        most 100 characters) and must be unique among sessions: one another
        session holds is TitleConflictError, one the rules refuse
        InvalidInputError -- both ValueError, raised before the session is
        looked up, as in the old class.
        """
        text_arg("session_id", session_id)
        cleaned = clean_title(title)
        if cleaned is not None:
            self._refuse_taken_title(cleaned, session_id)
        try:
            return self._changed(_SET_TITLE, {"p_id": session_id, "p_title": cleaned})
        except IntegrityError as error:  # lost a race with another writer
            raise TitleConflictError(f"title {cleaned!r} is already in use") from error

    def _refuse_taken_title(self, title: str, session_id: str) -> None:
        owner = self.title_owner(title, excluding=session_id)
        if owner is not None:
            raise TitleConflictError(f"title {title!r} is already in use by session {owner}")

    def title_owner(self, title: str, excluding: str) -> str | None:
        """The id of another session that already has ``title``, if any."""
        return self._c.execute(self._r.title_owner, {"p_title": title, "p_id": excluding}).scalar()

    def by_title(self, title: str) -> SessionRecord | None:
        """The session holding exactly this title, if any."""
        title = text_arg("title", title)
        row = self._c.execute(self._r.by_title, {"p_title": title}).mappings().first()
        return None if row is None else SessionRecord(**row)

    def resolve_by_title(self, title: str) -> str | None:
        """The newest session of the lineage: "T #3" beats "T #2" beats "T"."""
        title = text_arg("title", title)
        ranked = [
            (number, started_at, session_id)
            for session_id, stored, started_at in self._title_family(title)
            if (number := lineage_number(stored, title)) is not None
        ]
        return max(ranked)[2] if ranked else None

    def next_title_in_lineage(self, base_title: str) -> str:
        """ "Fix Docker Build" -> "Fix Docker Build #2" (or the next free number)."""
        base_title = text_arg("base_title", base_title)
        base = lineage_base(base_title)
        return next_in_lineage(base, (stored for _, stored, _ in self._title_family(base)))

    def _title_family(self, base: str) -> list[tuple[str, str, float]]:
        """(id, title, started_at) of the sessions titled ``base`` or ``base #<anything>``.

        Case-sensitive, as the numbering is; plain tuples, since a lineage of a
        cron job's sessions runs to thousands of rows.
        """
        backend = self._backend
        params = backend.title_family_params(base)
        rows = self._title_family_statement(backend).rows(self._c, params)
        return [(row[0], row[1], row[2]) for row in rows]

    def _title_family_statement(self, backend: Backend) -> Prepared:
        """The backend's lineage statement in this layout (cached per layout and backend)."""
        statement = self._r.title_family.get(backend.name)
        if statement is None:
            statement = Prepared(in_layout(backend.title_family_sql(), self._layout))
            self._r.title_family[backend.name] = statement
        return statement
