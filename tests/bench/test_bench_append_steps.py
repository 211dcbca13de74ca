"""``bench.micro.append_steps``: its steps run on the agent's files, and its dumps parse.

The callgrind client requests do nothing outside valgrind, so the child's
regions run here as they run under it (two calls each): a step whose code
moved or was renamed fails here rather than in a half-hour valgrind run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.micro import append_steps
from bench.micro.agent_layouts import agent_template

pytestmark = pytest.mark.sqlite_only("the step counts are of appends to SQLite files")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for the meter")
@pytest.mark.parametrize("version", [10, 25])
def test_every_step_runs_on_an_agent_file(tmp_path: Path, version: int) -> None:
    library = append_steps.build_meter(tmp_path)
    database = tmp_path / "copy.db"
    shutil.copyfile(agent_template(tmp_path, version), database)
    append_steps.child(library, database, 2)


def test_regions_reads_each_dump_by_its_name(tmp_path: Path) -> None:
    for index, (name, total) in enumerate([("empty loop", 1200), ("append", 91200)]):
        (tmp_path / f"cg.1.{index + 1}").write_text(
            f"version: 1\ndesc: Trigger: Client Request: {name}\nevents: Ir\nsummary: {total}\n"
        )
    (tmp_path / "cg.1").write_text("desc: Trigger: Program termination\nsummary: 5\n")
    assert append_steps.regions(iter(sorted(tmp_path.iterdir()))) == {
        "empty loop": 1200,
        "append": 91200,
    }
