"""The command line's shape: a package of its own, the target resolved once (issue #29 item 4).

A command function receives the store it works on as a resolved ``target``;
none of them reads --db, --url or --patience itself, so the rule of which store
is meant (an option, else the environment) lives in ``cli/target.py`` alone.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store.cli import COMMANDS
from hermes_store.cli.args import UsageError
from hermes_store.cli.target import Target, resolve
from tests.support.paths import REPO

STORE_OPTIONS = {"db", "url", "patience", "read_url", "max_replica_lag"}
WITHOUT_A_STORE = {"copy", "recover"}
"""The commands whose stores are their --from and --to, not --db or --url."""


def test_no_command_function_takes_the_store_options() -> None:
    for command in COMMANDS:
        parameters = set(inspect.signature(command.run).parameters)
        assert parameters & STORE_OPTIONS == set(), command.name
        assert ("target" in parameters) == (command.name not in WITHOUT_A_STORE), command.name


def test_every_command_that_names_a_store_parses_the_options_resolve_takes() -> None:
    for command in COMMANDS:
        dests = {
            spec.options.get("dest", spec.names[0].lstrip("-").replace("-", "_"))
            for spec in command.args
        }
        if command.name in WITHOUT_A_STORE:
            assert dests & STORE_OPTIONS == set(), command.name
        else:
            assert {"db", "url", "patience"} <= dests, command.name


def test_resolve_takes_the_options_out_and_names_the_store(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    options = {"db": path, "url": None, "patience": 2.0, "limit": 5}
    target = resolve(options)
    assert isinstance(target, Target)
    assert (target.path, target.patience, target.named) == (path, 2.0, True)
    assert options == {"limit": 5}  # what is left goes to the command as it is
    assert resolve({"source": "a", "destination": "b"}) is None


def test_resolve_reads_the_replica_of_a_reading_command_only_for_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_STORE_READ_URL", "postgresql://replica/db")
    reading = {"db": tmp_path / "s.db", "url": None, "patience": None, "read_url": None}
    target = resolve({**reading, "max_replica_lag": 3.0})
    assert target is not None and target.read_url is None and target.max_replica_lag == 3.0
    server = {**reading, "db": None, "url": "postgresql://primary/db", "max_replica_lag": 1.0}
    target = resolve(server)
    assert target is not None and target.read_url == "postgresql://replica/db"
    with pytest.raises(UsageError, match="not both"):
        resolve({**reading, "url": "sqlite:///x.db", "max_replica_lag": 1.0})


def test_api_keeps_the_facade_and_the_demo_only() -> None:
    api = REPO / "hermes_store" / "api"
    assert sorted(p.name for p in api.glob("*.py")) == ["__init__.py", "demo.py", "session_db.py"]


def test_python_dash_m_runs_the_package() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hermes-store ")
