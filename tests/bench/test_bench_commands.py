"""Every benchmark command the docs name is there to run, under the name they give it.

``bench/`` is grouped (micro/, field/, ops/, experiments/), and a module that moves
leaves behind every ``python -m bench....`` that named it: in the README, in the
design notes that quote its figures, in the package's docstrings, and in the
runners that start it as a child process. Nothing else would notice until someone
copies the command. Each named command is imported, not run (the benchmarks take
minutes and some want PostgreSQL): its module, or its package's ``__main__``,
must import and have a ``main`` to call. Dotted ``bench.`` names the docs mention
in prose must import too.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

# The repository root, wherever in tests/ this file sits.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())

COMMAND = re.compile(r"python -m (bench(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?![\w.<])")
CHILD = re.compile(r"\"-m\",\s*\"(bench(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\"")
DOTTED = re.compile(r"(?<![\w/.])(bench(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _texts(patterns: list[str]) -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for pattern in patterns
        for path in sorted(ROOT.glob(pattern))
    }


DOCS = _texts(["README.md", "docs/**/*.md"])
CODE = _texts(["hermes_store/**/*.py", "bench/**/*.py"])


def _named(pattern: re.Pattern[str], texts: dict[str, str]) -> dict[str, list[str]]:
    named: dict[str, list[str]] = {}
    for where, text in texts.items():
        for match in pattern.finditer(text):
            named.setdefault(match.group(1), []).append(where)
    return named


COMMANDS = {
    **_named(COMMAND, DOCS),
    **_named(COMMAND, CODE),
    **_named(CHILD, CODE),
}


def runnable(name: str) -> ModuleType:
    """What ``python -m name`` would run: the module, or the package's ``__main__``."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ModuleNotFoundError(name)
    if spec.submodule_search_locations is not None:  # a package: -m runs its __main__
        name = f"{name}.__main__"
    return importlib.import_module(name)


def resolves(dotted: str) -> bool:
    """``dotted`` is a module, or a name defined in one (``bench.micro.plain.PlainSessionDB``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_the_commands_are_found() -> None:
    assert "bench" in COMMANDS, "python -m bench is in the README and docs"
    assert "bench.field" in COMMANDS
    assert any(name.startswith("bench.micro.") for name in _named(CHILD, CODE))
    with pytest.raises(ModuleNotFoundError):
        runnable("bench.no_such_benchmark")
    assert not resolves("bench.field_corpus"), "the flat names are gone"
    assert resolves("bench.micro.plain.PlainSessionDB")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_named_command_imports_and_has_a_main(name: str) -> None:
    where = ", ".join(sorted(set(COMMANDS[name])))
    try:
        module = runnable(name)
    except ImportError as error:
        pytest.fail(f"python -m {name} (named in {where}) does not import: {error}")
    assert callable(getattr(module, "main", None)), f"python -m {name} ({where}) has no main()"


@pytest.mark.parametrize("name", sorted(_named(DOTTED, DOCS)))
def test_a_bench_name_in_the_docs_imports(name: str) -> None:
    where = ", ".join(sorted(set(_named(DOTTED, DOCS)[name])))
    assert resolves(name), f"{name} (named in {where}) is no module or name of bench/"
