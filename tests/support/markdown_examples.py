"""The Python examples of a Markdown page, found and run as a reader would run them.

Shared by tests/docs/test_readme_examples.py (README.md) and tests/docs/test_docs.py (the pages
under docs/). Each ```python block is run on its own, as a reader would paste it: in a
fresh interpreter, in an empty folder, with ``HERMES_HOME`` pointing to an empty folder
of its own (so ``SessionDB()`` makes a new ``state.db`` there). A block that cannot run
here because it needs something a test machine does not have says so on the line before
its fence::

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

NEEDS = re.compile(r"^<!-- needs: ([a-z0-9_, -]+) -->$")
KNOWN_NEEDS = {"postgresql": "a PostgreSQL server the example names (db.internal)"}


@dataclass(frozen=True)
class Example:
    page: str
    """The page's name as a reader finds it (``README.md``, ``docs/guides/cli.md``)."""
    line: int
    """The line of the opening fence, 1-based."""
    code: str
    needs: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def python_examples(text: str, page: str) -> list[Example]:
    """The page's ```python blocks in order, with what each one needs."""
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
                raise AssertionError(f"{page}:{index + 1}: the python block never closes")
            code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
            examples.append(Example(page, index + 1, code, _needs(lines, index)))
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


def check_markers(text: str, examples: list[Example]) -> None:
    """Every python block was found, and each needs marker is known and right before one."""
    page = examples[0].page if examples else "the page"
    assert len(examples) == text.count("```python"), f"{page}: a python block the parser missed"
    markers = [line for line in text.splitlines() if line.strip().startswith("<!-- needs:")]
    marked = [example for example in examples if example.needs]
    assert len(markers) == len(marked), f"{page}: a needs marker not right before a python block"
    for example in marked:
        unknown = set(example.needs) - set(KNOWN_NEEDS)
        assert not unknown, f"{example.name}: unknown needs {sorted(unknown)}"


def run_example(example: Example, tmp_path: Path) -> None:
    """Run one example in a fresh interpreter and an empty folder; skip it if marked."""
    if example.needs:
        wanted = "; ".join(KNOWN_NEEDS.get(need, need) for need in example.needs)
        pytest.skip(f"{example.name} needs {wanted} (<!-- needs: ... --> marker)")
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = tmp_path / f"example_{example.line}.py"
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
        f"{example.name} exited {completed.returncode}\n"
        f"--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
    )
