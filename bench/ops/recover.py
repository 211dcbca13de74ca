"""``python -m bench.ops.recover [--messages N] [--shell PATH]``: salvage figures per drill.

The drills of the test suite (bench/ops/damage.py) on a file of N messages
(20,000 by default): for each, the messages ``hermes_store.tools.recovery.recover``
got back and how long it took, against the ``sqlite3`` shell's ``.recover``
on the same damaged file -- rows it put back into ``messages`` and rows it
could only leave in ``lost_and_found``. Needs a shell whose ``.recover``
works (``--shell`` or ``$HERMES_SQLITE3_SHELL``); without one the shell's
columns are left empty.
"""

from __future__ import annotations

import argparse
import os
import shutil

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.recovery.recover import recover

from ..micro.corpus import CorpusSpec, build_corpus, make_template
from ..paths import WORK_ROOT
from .damage import DRILLS, SHELL_ENV, overwrite_pages, recover_shell, shell_recover

WORK = WORK_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--shell", help=f"sqlite3 shell with a working .recover (${SHELL_ENV})")
    args = parser.parse_args()
    if args.shell:
        os.environ[SHELL_ENV] = args.shell
    shell, why = recover_shell()
    work = WORK / "recover"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        pristine = work / "pristine.db"
        spec = CorpusSpec(total_messages=args.messages, long_session_messages=2000)
        build_corpus(make_template(work / "template.db"), pristine, spec)
        connection = sqlite3.connect(pristine)
        version = connection.execute("SELECT sqlite_version()").fetchone()[0]
        connection.close()
        print(f"{args.messages:,} messages; SQLite {version}; shell: {shell or why}")
        print(
            f"{'drill':<34} {'pages':>5} {'ours':>7} {'time':>6} "
            f"{'.recover':>9} {'+lost&found':>11} {'time':>6}"
        )
        for drill in DRILLS:
            damaged = work / "damaged.db"
            shutil.copyfile(pristine, damaged)
            pages = overwrite_pages(damaged, drill.pages(pristine), seed=drill.seed)
            target = work / "recovered.db"
            report = recover(damaged, target)
            theirs = "", "", ""
            if shell is not None:
                got = shell_recover(shell, damaged, work)
                theirs = (
                    f"{len(got['messages']):,}",
                    f"{len(got['lost_and_found_messages']):,}",
                    f"{got['seconds']:.1f}s",
                )
            print(
                f"{drill.name:<34} {len(pages):>5} {report.messages_recovered:>7,} "
                f"{report.seconds:>5.1f}s {theirs[0]:>9} {theirs[1]:>11} {theirs[2]:>6}"
            )
            target.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
