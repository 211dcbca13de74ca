"""Search statements are planned for their own parameters, never by a generic plan.

psycopg prepares a statement on the server after a few executions, and the
server then may switch it to one generic plan for every parameter. For the
other statements that is the point (planning costs more than running them);
for a search it is wrong: the best plan of a rank window depends on how
common the query is (walk the primary key newest first for a common word,
read the GIN index for a rare one), so a generic plan made while common
words were searched walked the whole table for a rare one. A statement
starting with :data:`CUSTOM_PLAN` is sent unprepared (:func:`execute`), so
the server plans it for the values it carries, as it does the first times.
"""

from __future__ import annotations

from typing import Any

CUSTOM_PLAN = "/* custom plan */ "
"""The mark, first in a statement's text, of one planned for its parameters every time."""


def execute(cursor: Any, statement: str, parameters: Any, _context: Any) -> bool | None:
    """SQLAlchemy's ``do_execute`` hook: a marked statement goes unprepared (True: done)."""
    if not statement.startswith(CUSTOM_PLAN):
        return None
    cursor.execute(statement, parameters, prepare=False)
    return True
