"""Progress lines of long commands (``cli/progress.py``): one every few seconds, anywhere."""

from __future__ import annotations

import io

from hermes_store.cli.progress import ProgressLines


def test_a_line_per_interval_with_rate_and_time_left_and_the_last_always() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = ProgressLines("copying", stream=out, every_s=3.0, clock=lambda: now[0])
    progress("messages", 0, 1000)
    for done, at in ((100, 1.0), (200, 2.0), (300, 3.0), (400, 4.0), (1000, 5.0)):
        now[0] = at
        progress("messages", done, 1000)
    assert out.getvalue().splitlines() == [
        "copying messages: starting, 1,000 to do",
        "copying messages: 300 of 1,000 (30%), 100/s, ETA 0m07s",
        "copying messages: 1,000 of 1,000 (100%), 200/s, done in 0m05s",
    ]
