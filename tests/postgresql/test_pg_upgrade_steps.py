"""``hermes-store upgrade --url`` on a populated store (issue #28, item 5): one step a line.

A PostgreSQL database left at revision 0013 with rows in it is brought to
head by the command line: each revision is its own transaction, reported on
stderr as it ends (revision, what it does, seconds), the total time on
stdout, and the rows come out searchable and counted by the new revisions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import URL

from hermes_store import SessionDB, Store
from hermes_store.backends import create_store_engine
from hermes_store.schema.migrate import upgrade, upgrade_in_steps
from hermes_store.schema.state import HEAD_REVISION
from hermes_store.tools.check import check
from tests.support.paths import REPO


def _populated_at_0013(url: URL) -> None:
    engine = create_store_engine(url)
    try:
        upgrade(engine, "0013")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO sessions (id, source, started_at, model, input_tokens, "
                    "message_count) SELECT 's' || n, 'cli', n, 'model-' || (n % 2), n, 20 "
                    "FROM generate_series(1, 50) AS n"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO messages (session_id, role, content, timestamp) "
                    "SELECT 's' || (1 + n % 50), 'user', 'rollout of build ' || n, n "
                    "FROM generate_series(1, 1000) AS n"
                )
            )
    finally:
        engine.dispose()


def test_cli_upgrade_reports_each_revision_and_the_total(
    tmp_path: Path, pg_fresh_url: Callable[[], URL]
) -> None:
    url = pg_fresh_url()
    _populated_at_0013(url)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_store.cli",
            "upgrade",
            "--url",
            url.render_as_string(hide_password=False),
        ],
        env={**os.environ, "HERMES_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stderr.splitlines() if line.startswith("upgrade ")]
    revisions = [line.split(":")[0].removeprefix("upgrade ") for line in steps]
    assert revisions[0] == "0014" and revisions[-1] == HEAD_REVISION, done.stderr
    assert all(line.endswith(" s)") for line in steps), steps
    assert "stored" in steps[0] or "tsvector" in steps[0], steps[0]
    assert f"revision 0013 -> schema version 6, revision {HEAD_REVISION} in " in done.stdout
    with SessionDB(url.render_as_string(hide_password=False)) as db:
        assert db.message_count() == 1000
        assert len(db.search_messages("rollout", limit=5)) == 5
        assert {row["model"] for row in db.token_usage_by_model()} == {"model-0", "model-1"}
    with Store(url) as store:
        assert check(store).ok


def test_each_step_is_its_own_transaction(pg_fresh_url: Callable[[], URL]) -> None:
    """After a step reports, its revision is committed: another connection sees it."""
    url = pg_fresh_url()
    _populated_at_0013(url)
    engine = create_store_engine(url)
    seen: list[tuple[str, str]] = []

    def on_step(revision: str, what: str, seconds: float) -> None:
        assert seconds >= 0 and what
        other = create_store_engine(url)
        try:
            with other.connect() as connection:
                recorded = connection.execute(
                    text("SELECT version_num FROM alembic_version")
                ).scalar_one()
        finally:
            other.dispose()
        seen.append((revision, recorded))

    try:
        upgrade_in_steps(engine, on_step)
    finally:
        engine.dispose()
    assert seen and all(revision == recorded for revision, recorded in seen), seen
    assert seen[-1][0] == HEAD_REVISION
