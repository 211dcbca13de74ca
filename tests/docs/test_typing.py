"""The package's types hold: ``mypy --strict`` passes on it, and a user's mypy sees them.

Both run mypy in a subprocess, as a developer or CI would, each with its own
fresh cache (a check that reuses a cache could report an old verdict). They
are the slowest tests of the suite (about half a minute each, mostly mypy
reading SQLAlchemy's annotations); neither depends on a backend, so each runs
once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hermes_store

PACKAGE_DIR = Path(hermes_store.__file__).resolve().parent
REPO = PACKAGE_DIR.parent


def _mypy(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-color-output", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return completed.returncode, completed.stdout + completed.stderr


def test_package_passes_mypy_strict(tmp_path: Path) -> None:
    code, output = _mypy(["--cache-dir", str(tmp_path / "cache"), "hermes_store"], cwd=REPO)
    assert code == 0, f"mypy --strict hermes_store failed:\n{output}"
    assert "Success: no issues found" in output, output


def test_a_users_mypy_checks_calls_against_the_shipped_types(tmp_path: Path) -> None:
    """A wrong argument type in code that uses the package is an error for the user's mypy.

    The package is found as an installed one (on the path, not as source
    given to mypy), so mypy reads its types only because it ships
    ``py.typed``; without it the import would be ``import-untyped`` and the
    call unchecked. The snippet's correct calls must pass, so the one error
    reported is the wrong ``content`` and nothing else.
    """
    assert (PACKAGE_DIR / "py.typed").is_file()
    snippet = tmp_path / "user_service.py"
    snippet.write_text(
        textwrap.dedent(
            """\
            from hermes_store import SessionDB, Store
            from hermes_store.domain.records import MessageRecord


            def record(db: SessionDB, store: Store) -> list[MessageRecord]:
                db.create_session("s1", "cli")
                db.append_message("s1", "user", content="fine")
                db.append_message("s1", "user", content=5)
                with store.read() as uow:
                    return uow.messages.for_session("s1")
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}
    args = ["--cache-dir", str(tmp_path / "cache"), snippet.name]
    code, output = _mypy(args, cwd=tmp_path, env=env)
    assert code == 1, output
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert len(errors) == 1, output
    assert errors[0].startswith("user_service.py:8: error:"), output
    assert '"content" to "append_message" of "SessionDB"' in errors[0], output
    assert '"int"; expected "str | None"' in errors[0], output
