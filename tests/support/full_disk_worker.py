"""Run as a separate process: the store on a disk without space.

``python tests/support/full_disk_worker.py SCENARIO DB`` prints one JSON object and
exits 0.

* ``checkpoint``: DB is filled, then this process's ``RLIMIT_FSIZE`` is
  lowered just past the main file's size (SIGXFSZ ignored), so a write
  reaching past it fails. The WAL stays below the limit, so commits land,
  but a checkpoint must grow the main file and fails. Every append is tried;
  the limit is then lifted and one more append made. Reports each append's
  outcome, the messages stored, the warnings logged and the main file's
  size before and after the last append. (A file size limit fails writes
  with EFBIG, which SQLite reports as an I/O error.)
* ``commit``: DB lives on a small file system of its own (the test mounts a
  tmpfs in a private mount namespace); a filler file takes its last byte, so
  the next commit cannot be written: SQLite's "database or disk is full".
  Reports the refused append's error and the messages stored afterwards.

Neither the limit nor the full file system is seen by anything else on the
machine.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
from typing import Any

from hermes_store import ContentionPolicy, SessionDB, Store

SEED_MESSAGES = 60
SEED_TEXT = "seed " + "x" * 20_000  # the main file: about 2.5 MB, far above the WAL's size
GROWING_TEXT = "z" * 10_000  # a message that needs new pages, so a checkpoint grows the file


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _seed(path: str) -> None:
    with SessionDB(path) as db:  # closing the last connection checkpoints everything
        db.create_session("s", "cli")
        db.append_messages("s", [{"role": "user", "content": SEED_TEXT}] * SEED_MESSAGES)


def _limit_file_size(limit: int) -> tuple[int, int]:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous[1]))
    return previous


def _outcome(call: Any) -> str:
    try:
        call()
    except Exception as error:  # the report names whatever came out
        return f"{type(error).__module__}.{type(error).__name__}: {error}"
    return "ok"


def checkpoint(path: str) -> dict[str, Any]:
    _seed(path)
    warnings = _Warnings()
    logging.getLogger("hermes_store").addHandler(warnings)
    store = Store(path, policy=ContentionPolicy(checkpoint_every=5))
    db = SessionDB(store=store)
    db.get_session("s")
    size = os.path.getsize(path)
    previous = _limit_file_size(size + 100)
    outcomes = [
        _outcome(lambda i=i: db.append_message("s", "user", f"limited {i} {GROWING_TEXT}"))
        for i in range(6)
    ]
    resource.setrlimit(resource.RLIMIT_FSIZE, previous)
    before_last = os.path.getsize(path)
    outcomes.append(_outcome(lambda: db.append_message("s", "user", f"after {GROWING_TEXT}")))
    report = {
        "outcomes": outcomes,
        "stored": db.message_count("s") - SEED_MESSAGES,
        "warnings": warnings.messages,
        "size_before_last": before_last,
        "size_after_last": os.path.getsize(path),
    }
    store.close()
    return report


def _fill_disk(folder: str) -> None:
    """Take every free byte of the file system holding ``folder``."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as filler:
        chunk = b"\0" * 65536
        while chunk:
            try:
                filler.write(chunk)
            except OSError:  # ENOSPC: the rest, byte by byte, down to nothing
                chunk = chunk[: len(chunk) // 2]


def commit(path: str) -> dict[str, Any]:
    store = Store(path, policy=ContentionPolicy(checkpoint_every=1000))
    db = SessionDB(store=store)
    db.create_session("s", "cli")
    db.append_message("s", "user", "lands before the disk is full")
    _fill_disk(os.path.dirname(path))
    refused = _outcome(lambda: db.append_message("s", "user", "x" * 50_000))
    report = {"refused": refused, "stored": db.message_count("s")}
    store.close()
    return report


def main() -> None:
    scenario, path = sys.argv[1:3]
    report = {"checkpoint": checkpoint, "commit": commit}[scenario](path)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
