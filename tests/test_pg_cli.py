"""``hermes-store --url postgresql+psycopg://...``: the command line on a PostgreSQL store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hermes_store import SessionDB

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "HERMES_STORE_URL"},
        "HERMES_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.api.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_command_line_runs_on_postgresql(tmp_path: Path, pg_fresh_url: Any) -> None:
    url = pg_fresh_url().render_as_string(hide_password=False)
    created = _run(tmp_path, "upgrade", "--url", url)
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("created ")
    again = _run(tmp_path, "upgrade", "--url", url)
    assert "already at head" in again.stdout
    current = json.loads(_run(tmp_path, "current", "--url", url, "--json").stdout)
    assert current["at_head"] is True and current["schema_version"] == 6

    demo = _run(tmp_path, "demo", "--url", url)
    assert demo.returncode == 0, demo.stderr
    assert "store:    postgresql+psycopg://" in demo.stdout, "was: store: None"
    hits = json.loads(_run(tmp_path, "search", "docker", "--url", url, "--json").stdout)
    assert hits and all(">>>" in hit["snippet"] for hit in hits)

    exported = tmp_path / "all.jsonl"
    assert _run(tmp_path, "export", "--url", url, "--out", str(exported)).returncode == 0
    back = tmp_path / "back.db"
    imported = _run(tmp_path, "import", str(exported), "--db", str(back))
    assert imported.returncode == 0, imported.stderr
    with SessionDB(url) as pg, SessionDB(back) as lite:
        assert pg.export_all() == lite.export_all()

    checked = _run(tmp_path, "check", "--url", url)
    assert checked.returncode == 0 and checked.stdout.rstrip().endswith("ok")
    missing = _run(tmp_path, "show", "no-such-session", "--url", url)
    assert missing.returncode == 1 and "no-such-session" in missing.stderr
