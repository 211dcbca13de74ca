"""``kill`` and a closed terminal stop a command the way Ctrl-C does: cleanly.

Python's default for SIGTERM and SIGHUP ends the process at once, so no
``finally`` block runs: a ``recover`` stopped that way left its scratch folder
(a full copy of a damaged store) and its half-built file until the next run.
Turned into an exception, the signal unwinds the command like
:class:`KeyboardInterrupt` does, and every clean-up on the way runs. SIGKILL
cannot be caught; the next run removes what such a run left.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOPPING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""SIGHUP does not exist on Windows, where the package also runs."""


class StoppedBySignal(BaseException):
    """The process was asked to stop; a ``BaseException`` so that no
    ``except Exception`` on the way swallows it."""

    def __init__(self, number: int) -> None:
        self.number = number
        super().__init__(signal.Signals(number).name)

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal."""
        return 128 + self.number


def _raise(number: int, _frame: FrameType | None) -> None:
    raise StoppedBySignal(number)


@contextmanager
def signals_unwind() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`StoppedBySignal`.

    Only the main thread may set handlers; elsewhere (``main`` called from a
    thread) the signals keep their handling.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, _raise) for number in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
