"""What ``hermes-store`` imports to answer: a fresh interpreter, its ``sys.modules`` afterwards.

Start-up is most of what a user waits for on ``current``, ``sessions`` and
``search`` (issue #19). Alembic (and its Mako templates) is only needed to
migrate, psycopg only for a PostgreSQL URL, the ORM (``sqlalchemy.orm`` and
the mapped classes) only for ``uow.orm``: a command reading a current SQLite
file must import none of them. ``current`` reads the file's state and layout
and nothing else, so it builds no repository's statements and renders no
table either. The command line is parsed by argparse: typer, click (and the
pydantic typer checks options with) are imported by no command; ``sessions``
and ``search`` draw their tables as plain text (:mod:`hermes_store.cli.table`), and rich
comes only with the other commands' tables, trees and progress bars. The check runs the
real entry point in a new process and reads that process's ``sys.modules``:
no timing involved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from hermes_store import SessionDB
from tests.support.paths import REPO

pytestmark = pytest.mark.sqlite_only("start-up on a SQLite file")

NEVER = ("alembic", "mako", "psycopg", "psycopg2", "typer", "click", "pydantic", "rich")
"""Top-level packages none of the three imports (argparse parses; their tables are plain text)."""
NEVER_MODULES = (
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "hermes_store.schema.models",
    "hermes_store.uow.orm",
)
"""Modules (and their submodules) no reading command imports."""
NOT_FOR_CURRENT = ("hermes_store.repositories",)
"""What ``current`` in particular does without: it prints three lines of the file's state."""


def _under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


_PROBE = """
import json, sys
sys.argv = ["hermes-store", *json.loads(sys.argv[1])]
from hermes_store.cli import main
try:
    main()
except SystemExit as done:
    code = done.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_after(*args: str) -> dict[str, object]:
    environment = {k: v for k, v in os.environ.items() if k != "HERMES_STORE_URL"}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture
def current_file(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s1", "cli", model="m")
        db.append_message("s1", "user", "docker deployment")
    return path


@pytest.mark.parametrize(
    "command", [["current"], ["sessions"], ["search", "docker"]], ids=lambda c: c[0]
)
def test_reading_a_current_file_imports_neither_alembic_nor_psycopg_nor_the_orm(
    command: list[str], current_file: Path
) -> None:
    probe = _modules_after(*command, "--db", str(current_file))
    assert probe["code"] == 0
    modules = probe["modules"]
    assert isinstance(modules, list) and "hermes_store.cli" in modules  # it did run
    assert [m for m in modules if m.split(".")[0] in NEVER] == []
    assert _under(modules, NEVER_MODULES) == []
    if command == ["current"]:
        assert _under(modules, NOT_FOR_CURRENT) == []


def test_the_probe_sees_the_orm_where_it_is_used(tmp_path: Path) -> None:
    """The check can fail: the mapped classes do import ``sqlalchemy.orm``."""
    code = (
        "import json, sys\n"
        "from hermes_store.schema.models import Session\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert "sqlalchemy.orm" in _under(json.loads(done.stdout), NEVER_MODULES)


def test_the_probe_sees_alembic_when_a_command_migrates(tmp_path: Path) -> None:
    """The check can fail: ``upgrade`` of a new file does import Alembic."""
    probe = _modules_after("upgrade", "--db", str(tmp_path / "new.db"))
    assert probe["code"] == 0
    assert "alembic" in probe["modules"]


def test_the_probe_sees_rich_where_a_command_prints_with_it(current_file: Path) -> None:
    """The check can fail: ``stats`` prints rich tables, and does import rich."""
    probe = _modules_after("stats", "--db", str(current_file))
    assert probe["code"] == 0 and "rich.table" in probe["modules"]


def test_every_command_is_listed_with_its_line_and_its_help_lists_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hermes_store.cli import COMMANDS, main

    def run(*args: str) -> tuple[object, str]:
        try:
            main(list(args))
        except SystemExit as done:
            return done.code, capsys.readouterr().out
        return 0, capsys.readouterr().out

    code, listing = run("--help")
    assert code == 0
    listed = " ".join(listing.split())  # argparse wraps the lines to the terminal
    assert {"current", "sessions", "search", "import", "copy", "recover"} <= {
        c.name for c in COMMANDS
    }
    for command in COMMANDS:
        assert f"{command.name} {command.summary}" in listed, command.name
        code, shown = run(command.name, "--help")
        assert code == 0 and f"usage: hermes-store {command.name}" in shown
        for spec in command.args:
            for name in spec.names:
                shown_name = name if name.startswith("-") else spec.options["metavar"]
                assert shown_name in shown, (command.name, name)


def test_a_named_command_is_parsed_alone_and_reads_as_among_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only the named command's parser is built at start-up; its help and errors are the same."""
    from hermes_store.cli import COMMANDS, DESCRIPTION, _version
    from hermes_store.cli.args import Command, build_parser, named

    def parse(commands: Sequence[Command], args: list[str]) -> tuple[object, str, str]:
        parser = build_parser("hermes-store", DESCRIPTION, commands, _version)
        with pytest.raises(SystemExit) as done:
            parser.parse_args(args)
        captured = capsys.readouterr()
        return done.value.code, captured.out, captured.err

    for command in COMMANDS:
        assert named([command.name, "--json"], COMMANDS) == [command]
        for args in ([command.name, "--help"], [command.name, "--no-such-option"]):
            assert parse([command], args) == parse(COMMANDS, args), args
    for argv in ([], ["--help"], ["curent"]):
        assert named(argv, COMMANDS) is COMMANDS
