"""A short end-to-end run on the default store: write a session, search it, read it back.

``python -m hermes_store.api.demo`` is the README's "main job": it exercises the
path the agent uses every turn (append with counters, FTS search, lineage)
against ``$HERMES_HOME/state.db`` (default ``~/.hermes/state.db``).
"""

from __future__ import annotations

import os
import sys
import time

from hermes_store import SessionDB


def run(db: SessionDB) -> int:
    stamp = f"{int(time.time() * 1000)}-{os.getpid()}"
    root = db.create_session(f"demo-{stamp}", "cli", model="anthropic/claude-sonnet-4.6")
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
    child = db.create_session(f"demo-{stamp}-2", "cli", parent_session_id=root)
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
    with SessionDB() as db:
        return run(db)


if __name__ == "__main__":
    sys.exit(main())
