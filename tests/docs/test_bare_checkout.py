"""A checkout put on ``sys.path`` without installing works (issue #29, item 5).

Without an install there is no ``hermes_store._migrations`` package (the wheel
maps ``migrations/`` to it), so the store must find the Alembic scripts in the
checkout's own ``migrations/`` folder. The test runs exactly what a reader
would type, ``PYTHONPATH=<checkout> python -c "..."``, in a clean environment
and with an interpreter that has the dependencies but not hermes_store: a
fresh virtual environment whose only addition is a path file naming this
environment's site-packages. Path lines are not processed further, so the
editable install's import hook (itself a ``.pth`` there) never runs.
"""

from __future__ import annotations

import os
import site
import subprocess
import venv
from pathlib import Path

from tests.support.paths import REPO

CHECKOUT = REPO

BARE_COMMAND = "from hermes_store import SessionDB; SessionDB('x.db')"

PROBE = """
import importlib.util, sys
import hermes_store
assert importlib.util.find_spec("hermes_store._migrations") is None, "installed after all"
print(hermes_store.__file__)
"""


def _python_without_hermes_store(root: Path) -> Path:
    """A venv that imports the dependencies (SQLAlchemy, Alembic...) but no hermes_store."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dependencies = [path for path in site.getsitepackages() if Path(path).is_dir()]
    (Path(purelib) / "dependencies.pth").write_text("\n".join(dependencies) + "\n")
    return python


def _clean_env() -> dict[str, str]:
    """Nothing of this run's environment but the PATH and the checkout on PYTHONPATH."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(CHECKOUT)}


def test_a_bare_checkout_on_pythonpath_opens_a_new_store(tmp_path: Path) -> None:
    python = _python_without_hermes_store(tmp_path / "venv")
    work = tmp_path / "work"
    work.mkdir()

    probe = subprocess.run(
        [python, "-c", PROBE], cwd=work, env=_clean_env(), capture_output=True, text=True
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(CHECKOUT / "hermes_store"), probe.stdout

    done = subprocess.run(
        [python, "-c", BARE_COMMAND], cwd=work, env=_clean_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (work / "x.db").stat().st_size > 0

    # The file it made is at the head schema: the migrations really ran.
    check = subprocess.run(
        [
            python,
            "-c",
            "from hermes_store import SessionDB\n"
            "with SessionDB('x.db', read_only=True) as db:\n"
            "    print(db.session_count())",
        ],
        cwd=work,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and check.stdout.strip() == "0", check.stderr
