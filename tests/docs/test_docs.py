"""The documentation site builds strictly, offline, and says what the code has.

``mkdocs build --strict`` turns every warning into a failure: a broken link or anchor
between pages, a page left out of the navigation, a name mkdocstrings cannot find. It
runs in a network namespace of its own where the machine allows one (``unshare -n``),
so a theme or plugin reaching for the network fails here rather than in someone's
offline checkout. The API reference is checked against the code: every public name of
``hermes_store`` and ``hermes_store.aio``, and every public method of each repository a
unit of work hands out, with its signature. The pages' Python examples run the way the
README's do (tests/support/markdown_examples.py).
"""

from __future__ import annotations

import html
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hermes_store
import hermes_store.aio
import hermes_store.repositories
from hermes_store.repositories.maintenance import MaintenanceRepository
from hermes_store.uow.unit import UnitOfWork
from tests.support.markdown_examples import Example, check_markers, python_examples, run_example
from tests.support.paths import REPO

ROOT = REPO
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
EXAMPLES = [
    example
    for page in PAGES
    for example in python_examples(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
]


def _offline(argv: list[str]) -> list[str]:
    """``argv`` without a network, where this machine can make a namespace for it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n", *argv]
    return argv


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        _offline([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"mkdocs build --strict failed\n{built.stdout}\n{built.stderr}"
    return out


def _reference_html(site: Path) -> str:
    pages = sorted((site / "reference").rglob("index.html"))
    assert pages, "no API reference was built"
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_the_site_builds_strictly_and_offline(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()  # the site is searchable
    nav = (site / "index.html").read_text(encoding="utf-8")
    for page in PAGES:  # every page is built and reachable from the navigation
        relative = page.relative_to(DOCS).with_suffix("")
        target = "" if relative.name == "index" else f"{relative.as_posix()}/"
        assert (site / target / "index.html").is_file(), page
        if target:
            assert f'href="{target}"' in nav, f"{page} is not in the navigation"


def test_every_public_name_is_in_the_reference(site: Path) -> None:
    reference = _reference_html(site)
    names = [*hermes_store.__all__, *hermes_store.aio.__all__]
    missing = [name for name in names if not re.search(rf'id="[\w.]+\.{name}"', reference)]
    assert not missing, f"public names the API reference leaves out: {missing}"


def _repositories() -> list[type]:
    """What ``uow.sessions``/``.messages``/``.search`` are, and the maintenance checks."""
    found: list[type] = []
    for name, member in vars(UnitOfWork).items():
        if isinstance(member, property) and member.fget is not None and not name.startswith("_"):
            returned = str(member.fget.__annotations__.get("return", ""))
            if returned.endswith("Repository"):
                found.append(getattr(hermes_store.repositories, returned))
    assert len(found) >= 3, found  # sessions, messages, search at least
    return [*found, MaintenanceRepository]


def test_every_repository_method_is_in_the_reference_with_its_signature(site: Path) -> None:
    page = (site / "reference" / "repositories" / "index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    missing = []
    for repository in _repositories():
        path = f"{repository.__module__}.{repository.__qualname__}"
        for name, method in inspect.getmembers(repository, inspect.isfunction):
            if name.startswith("_"):
                continue
            if f'id="{path}.{name}"' not in page:
                missing.append(f"{path}.{name}")
                continue
            first = next(iter(inspect.signature(method).parameters), None)
            assert first == "self", (path, name)
            if f"{name}(" not in text:
                missing.append(f"{path}.{name} (no signature)")
    assert not missing, f"repository methods the reference leaves out: {missing}"


def test_the_pages_python_blocks_are_found_and_marked() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        check_markers(text, [e for e in EXAMPLES if e.page == str(page.relative_to(ROOT))])
    assert len(EXAMPLES) >= 5  # the guides' examples, not an empty parametrization


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_docs_example_runs(example: Example, tmp_path: Path) -> None:
    run_example(example, tmp_path)


# Measurement history in the code (issue #29, item 3): the code says why, the design notes
# keep the numbers. Settings (a 1 s busy timeout, 20-150 ms of jitter) are not history.
HISTORY = re.compile(
    r"\bmeasured\b|\bfell from\b|\bwent from\b|\d(?:\.\d+)?\s?[x×]\s+(?:slower|faster)"
    r"|\d\s?(?:ms|us|µs)\s+(?:instead of|against)\s+\d",
    re.IGNORECASE,
)


def history_in(source: str) -> list[str]:
    """The comments and docstrings of ``source`` that carry measurement history."""
    import io
    import tokenize

    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        is_text = token.type == tokenize.COMMENT or (
            token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith('"""')
        )
        if is_text:
            found += [
                f"line {token.start[0]}: {m.group(0)!r}" for m in HISTORY.finditer(token.string)
            ]
    return found


def test_code_keeps_the_why_and_the_docs_keep_the_numbers() -> None:
    assert history_in("x = 1  # fell from 180 to 111 ms\n"), "the pattern finds history"
    assert not history_in("x = 1  # a 1 s busy timeout, 20-150 ms of jitter\n")
    found = {
        str(path.relative_to(ROOT)): history_in(path.read_text(encoding="utf-8"))
        for folder in ("hermes_store", "migrations")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    found = {path: lines for path, lines in found.items() if lines}
    assert not found, f"measurements to move into docs/design/: {found}"


def test_the_readme_is_one_screen_of_links_into_the_docs() -> None:
    """README ≤ 200 lines (issue #29); the rest is in docs/, and every link there lands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10, links
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert not missing, f"README links to pages that do not exist: {missing}"
