"""Every Python example of the README runs as written.

Each ```python block is run on its own, as a reader would paste it: in a
fresh interpreter, in an empty folder, with ``HERMES_HOME`` pointing to an
empty folder of its own (so ``SessionDB()`` makes a new ``state.db`` there).
A block that cannot run here because it needs something a test machine does
not have says so in the README, on the line before its fence::

    <!-- needs: postgresql -->

Those, and only those, are skipped, each naming what it needs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
NEEDS = re.compile(r"^<!-- needs: ([a-z0-9_, -]+) -->$")
KNOWN_NEEDS = {"postgresql": "a PostgreSQL server the example names (db.internal)"}


@dataclass(frozen=True)
class Example:
    line: int
    """The line of the opening fence, 1-based."""
    code: str
    needs: tuple[str, ...]


def readme_examples(text: str) -> list[Example]:
    """The README's ```python blocks in order, with what each one needs."""
    lines = text.splitlines()
    examples = []
    index = 0
    while index < len(lines):
        fence = lines[index]
        if fence.lstrip().startswith("```python"):
            indent = len(fence) - len(fence.lstrip())
            end = index + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise AssertionError(f"README.md:{index + 1}: the python block never closes")
            code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
            examples.append(Example(index + 1, code, _needs(lines, index)))
            index = end
        index += 1
    return examples


def _needs(lines: list[str], fence: int) -> tuple[str, ...]:
    previous = fence - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    found = NEEDS.match(lines[previous].strip()) if previous >= 0 else None
    if found is None:
        return ()
    return tuple(sorted(need.strip() for need in found.group(1).split(",")))


EXAMPLES = readme_examples(README.read_text(encoding="utf-8"))
EXAMPLES_BY_LINE = {example.line: example for example in EXAMPLES}


def test_every_python_block_is_found_and_every_marker_is_known() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(EXAMPLES) == text.count("```python"), "a python block the parser missed"
    assert len(EXAMPLES) >= 5  # the README's examples, not an empty parametrization
    markers = [line for line in text.splitlines() if line.strip().startswith("<!-- needs:")]
    marked = [example for example in EXAMPLES if example.needs]
    # Each marker stands right before a python block: none is stray or malformed.
    assert len(markers) == len(marked), "a needs marker that is not right before a python block"
    for example in marked:
        unknown = set(example.needs) - set(KNOWN_NEEDS)
        assert not unknown, f"README.md:{example.line}: unknown needs {sorted(unknown)}"


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


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"README.md:{e.line}" for e in EXAMPLES])
def test_readme_example_runs(example: Example, tmp_path: Path) -> None:
    if example.needs:
        wanted = "; ".join(KNOWN_NEEDS.get(need, need) for need in example.needs)
        pytest.skip(f"README.md:{example.line} needs {wanted} (<!-- needs: ... --> marker)")
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = tmp_path / f"readme_{example.line}.py"
    script.write_text(example.code, encoding="utf-8")
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "hermes-home")}
    env.pop("HERMES_STORE_URL", None)  # the examples mean the default store, a SQLite file
    completed = subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, (
        f"README.md:{example.line} exited {completed.returncode}\n"
        f"--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
    )


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
            "hermes_store.api.cli",
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
