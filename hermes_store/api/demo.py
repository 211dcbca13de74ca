"""A short end-to-end run on a store of its own: write a session, search it, read it back.

``python -m hermes_store.api.demo`` is the README's "main job": it exercises the
path the agent uses every turn (append with counters, FTS search, lineage)
against ``./hermes-demo/state.db`` (made, and brought to the head schema, on the
first run), never against the agent's ``~/.hermes/state.db``: a newcomer's
first command must not write demo sessions into someone's history. For the
same reason the demo refuses any store that holds sessions other than its own
(``hermes-store demo --db`` points it elsewhere).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sqlalchemy import select

from hermes_store import SessionDB
from hermes_store.errors import InvalidInputError, StoreError
from hermes_store.schema.tables import sessions_table

DEMO_STORE = Path("hermes-demo") / "state.db"
"""Where the demo writes unless told otherwise: beside the checkout, not in ``$HERMES_HOME``."""
PREFIX = "demo-"
"""Every session the demo writes has an id that starts so; any other id is someone's."""


def refuse_a_store_in_use(db: SessionDB) -> None:
    """Raise ``InvalidInputError`` if the store holds a session the demo did not write."""
    with db.store.read() as uow:
        other = uow.connection.execute(
            select(sessions_table.c.id).where(~sessions_table.c.id.startswith(PREFIX)).limit(1)
        ).first()
    if other is not None:
        where = db.db_path or db.store.url.render_as_string(hide_password=True)
        raise InvalidInputError(
            f"{where} holds sessions that are not the demo's (such as {other[0]!r}); the demo "
            f"writes only into a store of its own: run it on a new file ({DEMO_STORE} by "
            "default); nothing was written"
        )


def run(db: SessionDB) -> int:
    refuse_a_store_in_use(db)
    stamp = f"{int(time.time() * 1000)}-{os.getpid()}"
    root = db.create_session(f"{PREFIX}{stamp}", "cli", model="anthropic/claude-sonnet-4.6")
    db.set_session_title(root, db.get_next_title_in_lineage("Demo: fix the docker build"))
    db.append_messages(
        root,
        [
            {"role": "user", "content": "My docker build fails with 'no space left on device'."},
            {
                "role": "assistant",
                "content": "Let me check the disk usage first.",
                "tool_calls": [{"id": "call_1", "function": {"name": "terminal"}}],
            },
            {"role": "tool", "content": "/var/lib/docker is 98% full", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "Run `docker system prune` to free the space."},
        ],
    )
    db.update_token_counts(root, input_tokens=1200, output_tokens=340, estimated_cost_usd=0.0087)
    child = db.create_session(f"{root}-2", "cli", parent_session_id=root)
    db.append_message(child, "user", "The docker build works now, thanks!")
    db.end_session(child, "user_exit")

    session = db.get_session(root)
    assert session is not None  # created above
    where = db.db_path or db.store.url.render_as_string(hide_password=True)
    print(f"store:    {where}")
    print(
        f"session:  {root} {session['title']!r}: {session['message_count']} messages, "
        f"{session['tool_call_count']} tool call(s)"
    )
    print(f"lineage:  {[s['id'] for s in db.get_descendants(root)]}")
    hits = db.search_messages("docker prune OR disk", limit=5)
    print(f"search 'docker prune OR disk': {len(hits)} hit(s)")
    for hit in hits:
        print(f"  [{hit['session_id']}] {hit['role']}: {hit['snippet']}")
    return 0 if hits and session["message_count"] == 4 else 1


def main() -> int:
    try:
        with SessionDB(DEMO_STORE) as db:
            return run(db)
    except StoreError as error:  # a store in use, locked, read-only, damaged ...
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
