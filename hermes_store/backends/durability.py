"""How safe a write is once the call that made it has returned.

This is the one trade of safety for speed the store offers, and it is the
caller's to make, per store; the default is the old store's.

``FULL`` (default): every commit is flushed to the disk before the call
returns -- SQLite's ``synchronous=FULL``, PostgreSQL's
``synchronous_commit=on`` -- so a write that returned survives a power loss.

``NORMAL``: the commit is handed to the operating system and the call
returns; the disk flush happens at the next WAL checkpoint (SQLite
``synchronous=NORMAL`` in WAL mode) or within a fraction of a second
(PostgreSQL ``synchronous_commit=off``). A write that returned survives the
process being killed, and the database is never corrupted, but the last
commits before an operating-system crash or a power loss may be gone.

The flush is most of an append's time on disk: what ``NORMAL`` saves is in
the ``durability=normal`` rows of ``python -m bench`` (docs/benchmarks.md).
"""

from __future__ import annotations

from enum import StrEnum

from hermes_store.errors import InvalidInputError


class Durability(StrEnum):
    """When a commit is on the disk; the members' values are what callers may pass as text."""

    FULL = "full"
    NORMAL = "normal"

    @classmethod
    def of(cls, value: Durability | str) -> Durability:
        """``value`` as a member; a clear error names the value and the choices."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(member.value) for member in cls)
            raise InvalidInputError(f"durability must be one of {choices}; got {value!r}") from None

    @property
    def sqlite_synchronous(self) -> str:
        """The ``PRAGMA synchronous`` level: FULL syncs the WAL at every commit."""
        return "FULL" if self is Durability.FULL else "NORMAL"

    @property
    def postgresql_synchronous_commit(self) -> str:
        """The ``synchronous_commit`` setting: ``on`` waits for the WAL flush."""
        return "on" if self is Durability.FULL else "off"
