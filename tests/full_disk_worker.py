"""Run as a separate process: the store on a file system that is full (a file size limit).

``python tests/full_disk_worker.py SCENARIO DB`` fills DB, then lowers this
process's ``RLIMIT_FSIZE`` just past the main file's size, so that a write
reaching past it fails as on a full disk (SIGXFSZ ignored, as a file system
without space raises no signal). It prints one JSON object and exits 0.

* ``checkpoint``: the WAL stays below the limit, so commits land, but a
  checkpoint must grow the main file and fails. Every append is tried; the
  limit is then lifted and one more append made. Reports each append's
  outcome, the messages stored, the warnings logged and the main file's
  size before and after the last append.
* ``commit``: the limit sits just past the WAL's end, so the next commit
  cannot be written. Reports the refused append's error and the messages
  stored afterwards.

The limit applies to this process only; nothing else on the machine sees a
full disk.
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


def commit(path: str) -> dict[str, Any]:
    _seed(path)
    store = Store(path, policy=ContentionPolicy(checkpoint_every=1000))
    db = SessionDB(store=store)
    db.append_message("s", "user", "lands before the limit")  # the WAL now exists
    previous = _limit_file_size(os.path.getsize(f"{path}-wal") + 100)
    refused = _outcome(lambda: db.append_message("s", "user", "x" * 50_000))
    resource.setrlimit(resource.RLIMIT_FSIZE, previous)
    report = {"refused": refused, "stored": db.message_count("s") - SEED_MESSAGES}
    store.close()
    return report


def main() -> None:
    scenario, path = sys.argv[1:3]
    report = {"checkpoint": checkpoint, "commit": commit}[scenario](path)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
