"""``hermes-store --url postgresql+psycopg://...``: the command line on a PostgreSQL store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, StoreUnavailableError
from tests.support.paths import REPO


def _run(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "HERMES_STORE_URL"},
        "HERMES_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=cwd,
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


def _refusing_port() -> int:
    """A local port nothing listens on (bound, then let go): a connection there is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_server_that_refuses_the_connection_is_named_not_called_lost(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    port = _refusing_port()
    url = f"postgresql+psycopg://hermes@127.0.0.1:{port}/hermes"
    for command in (("sessions",), ("search", "docker"), ("upgrade",)):
        done = _run(tmp_path, *command, "--url", url)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"could not connect to the server at 127.0.0.1:{port}" in done.stderr
        assert "COMMIT" not in done.stderr and "lost the connection" not in done.stderr
    with pytest.raises(StoreUnavailableError, match=f"could not connect .*127.0.0.1:{port}"):
        SessionDB(url, read_only=True)


def test_a_url_without_a_scheme_is_refused_not_taken_as_a_path(tmp_path: Path) -> None:
    for command in (("upgrade",), ("sessions",), ("demo",)):
        done = _run(tmp_path, *command, "--url", "notaurl", cwd=tmp_path)
        assert done.returncode == 2 and "argument --url: takes a URL" in done.stderr, done.stderr
        assert "--db PATH" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing is created"
