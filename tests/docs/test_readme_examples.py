"""Every Python example of the README runs as written.

How a block is found, marked (``<!-- needs: postgresql -->``) and run is
tests/support/markdown_examples.py, which tests/docs/test_docs.py shares for the pages of docs/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.markdown_examples import Example, check_markers, python_examples, run_example
from tests.support.paths import REPO

README = REPO / "README.md"

EXAMPLES = python_examples(README.read_text(encoding="utf-8"), "README.md")
EXAMPLES_BY_LINE = {example.line: example for example in EXAMPLES}


def test_every_python_block_is_found_and_every_marker_is_known() -> None:
    check_markers(README.read_text(encoding="utf-8"), EXAMPLES)
    assert len(EXAMPLES) >= 5  # the README's examples, not an empty parametrization


def test_only_the_marked_blocks_are_skipped() -> None:
    """The skipped examples are exactly the ones that need a server, listed by line."""
    text = README.read_text(encoding="utf-8").splitlines()
    skipped = [example.line for example in EXAMPLES if example.needs]
    expected = [
        number + 2
        for number, line in enumerate(text)
        if line.strip() == "<!-- needs: postgresql -->"
    ]
    assert skipped == expected
    assert all("postgresql" in EXAMPLES_BY_LINE[line].code for line in skipped)


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_readme_example_runs(example: Example, tmp_path: Path) -> None:
    run_example(example, tmp_path)


def _quick_start() -> list[str]:
    """The README's first block: the two commands a newcomer runs."""
    text = README.read_text(encoding="utf-8")
    assert text.startswith("# hermes_store\n\n```bash\n"), "the README opens with its quick start"
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_the_quick_start_is_set_up_and_demo_then_the_test_command() -> None:
    setup, tests = _quick_start()
    assert setup.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && ")
    assert tests == ".venv/bin/pytest -n auto"
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert f"\n{tests}\n" in ci, ".ci/run runs exactly the README's test command"


@pytest.mark.parametrize("hermes_home", ["unset", "set"])
def test_the_quick_start_writes_its_own_store_never_the_agents(
    tmp_path: Path, hermes_home: str
) -> None:
    """The first line's commands after the install, in an empty folder, as a newcomer runs them.

    The person's own store (``$HERMES_HOME/state.db``, else ``~/.hermes/state.db``) holds
    sessions of theirs: it must come out byte for byte as it was.
    """
    from hermes_store import SessionDB

    home = tmp_path / "home"
    agent_home = tmp_path / "agent-home" if hermes_home == "set" else home / ".hermes"
    with SessionDB(agent_home / "state.db") as db:
        db.create_session("20260105_142233_a1b2c3", "cli")
        db.append_message("20260105_142233_a1b2c3", "user", "my own docker notes")
    before = {p: p.read_bytes() for p in agent_home.iterdir()}
    checkout = tmp_path / "checkout"  # what the commands may read of the checkout they run in
    checkout.mkdir()
    for name in ("alembic.ini", "migrations"):
        (checkout / name).symlink_to(README.parent / name)
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "HERMES_STORE_URL")}
    env["HOME"] = str(home)
    if hermes_home == "set":
        env["HERMES_HOME"] = str(agent_home)
    bin_dir = Path(sys.executable).parent
    commands = _quick_start()[0].split(" && ")[2:]  # the venv and the install are this run's
    assert commands, "the first line runs the main job after installing"
    for _ in range(2):  # a second run adds to the demo's own store
        for command in commands:
            assert command.startswith(".venv/bin/"), command
            argv = command.replace(".venv/bin/", f"{bin_dir}/", 1).split()
            done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    assert "store:    hermes-demo/state.db" in done.stdout and "hit(s)" in done.stdout
    assert {p: p.read_bytes() for p in agent_home.iterdir()} == before
    with SessionDB(checkout / "hermes-demo" / "state.db", read_only=True) as demo:
        assert demo.session_count() == 4

    # Pointed at a store in use, the demo refuses and writes nothing.
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_store.cli",
            "demo",
            "--db",
            str(agent_home / "state.db"),
        ],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(README.parent)},
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "not the demo's" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert {p: p.read_bytes() for p in agent_home.iterdir()} == before
