"""Run part of a test in a child made by ``os.fork()``, and get back what it returned.

The child shares the parent's memory as it was at the fork -- its engines,
pools and kept connections -- which is exactly what the fork tests are
about. It reports ``("ok", result)`` or ``("ExceptionClass", message)``
through a pipe and always ends with ``os._exit``, never returning into pytest.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
from collections.abc import Callable
from typing import Any

CHILD_PATIENCE_S = 60.0
"""How long the parent waits for the child's answer before it kills the child and fails."""


def run_forked(call: Callable[[], Any], *, in_child: Callable[[], None] | None = None) -> Any:
    """``(kind, value)`` of ``call()`` in a forked child; ``in_child`` runs first there.

    A child stuck after the fork (a lock another thread of the parent held at
    that moment stays held in the child, forever) is killed after
    :data:`CHILD_PATIENCE_S` and reported as ``("Timeout", ...)``, so the test
    fails by name instead of hanging.
    """
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(reader)
            try:
                if in_child is not None:
                    in_child()
                outcome: tuple[str, Any] = ("ok", call())
            except BaseException as error:
                outcome = (type(error).__name__, str(error))
            with os.fdopen(writer, "wb") as pipe:
                pickle.dump(outcome, pipe)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        ready, _, _ = select.select([pipe], [], [], CHILD_PATIENCE_S)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return ("Timeout", f"the forked child gave no answer in {CHILD_PATIENCE_S:.0f} s")
        data = pipe.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)
