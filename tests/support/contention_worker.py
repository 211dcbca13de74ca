"""One writer process of the contention test (run by tests/contention/test_contention.py).

``python tests/support/contention_worker.py DB WORKER_ID APPENDS GO_FILE [MODE]`` opens the
store, waits until GO_FILE exists so every worker starts at once, then
interleaves appends to its own session, appends to the shared session and
counter updates. It prints one JSON line with what it wrote. MODE ``async``
does the same writes through ``AsyncSessionDB`` (shared commits), its own
session's appends and the shared session's writes as two concurrent tasks.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB


async def run_async(db_path: str, worker: int, appends: int, go_file: str) -> dict[str, int]:
    db = await AsyncSessionDB.open(db_path)
    own = f"worker-{worker}"
    await db.create_session(own, "cli", model=f"model-{worker % 2}", parent_session_id="shared")
    while not Path(go_file).exists():
        await asyncio.sleep(0.005)

    async def own_appends() -> int:
        tool_calls = 0
        for i in range(appends):
            calls = [{"id": f"call-{worker}-{i}"}] if i % 3 == 0 else None
            await db.append_message(
                own, "assistant", f"worker{worker} says item{i}", tool_calls=calls
            )
            tool_calls += 1 if calls else 0
        return tool_calls

    async def shared_writes() -> int:
        shared_messages = 0
        for i in range(appends):
            await db.update_token_counts(
                "shared", input_tokens=1, output_tokens=2, estimated_cost_usd=0.5
            )
            if i % 5 == 0:
                await db.append_messages(
                    "shared",
                    [
                        {"role": "user", "content": f"shared question {worker}-{i}"},
                        {"role": "assistant", "content": f"shared answer {worker}-{i}"},
                    ],
                )
                shared_messages += 2
        return shared_messages

    tool_calls, shared_messages = await asyncio.gather(own_appends(), shared_writes())
    await db.close()
    return {"worker": worker, "tool_calls": tool_calls, "shared": shared_messages}


def main() -> None:
    db_path, worker, appends, go_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if sys.argv[5:] == ["async"]:
        print(json.dumps(asyncio.run(run_async(db_path, worker, appends, go_file))))
        return
    db = SessionDB(db_path)
    own = f"worker-{worker}"
    db.create_session(own, "cli", model=f"model-{worker % 2}", parent_session_id="shared")
    while not Path(go_file).exists():
        time.sleep(0.005)
    tool_calls = 0
    shared_messages = 0
    for i in range(appends):
        calls = [{"id": f"call-{worker}-{i}"}] if i % 3 == 0 else None
        db.append_message(own, "assistant", f"worker{worker} says item{i}", tool_calls=calls)
        tool_calls += 1 if calls else 0
        db.update_token_counts("shared", input_tokens=1, output_tokens=2, estimated_cost_usd=0.5)
        if i % 5 == 0:
            db.append_messages(
                "shared",
                [
                    {"role": "user", "content": f"shared question {worker}-{i}"},
                    {"role": "assistant", "content": f"shared answer {worker}-{i}"},
                ],
            )
            shared_messages += 2
    db.close()
    print(json.dumps({"worker": worker, "tool_calls": tool_calls, "shared": shared_messages}))


if __name__ == "__main__":
    main()
