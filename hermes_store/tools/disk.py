"""Free space and directory flushes, for the files this package writes besides state.db.

A backup or a recovery that runs out of space half-way leaves a torn file
and, worse, may already have deleted what it meant to replace; so each
checks the space first and makes its rename durable with a flush of the
directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hermes_store.errors import StoreError


def require_free_space(directory: Path, needed: int, what: str, error: type[StoreError]) -> None:
    """Raise ``error`` unless ``directory`` has ``needed`` bytes free (and 16 MB to spare)."""
    free = shutil.disk_usage(directory).free
    if free < needed + (16 << 20):
        raise error(
            f"not enough free space in {directory}: {what} needs about {needed / 1e6:.0f} MB, "
            f"{free / 1e6:.0f} MB free; nothing was written"
        )


def sync(path: Path) -> None:
    """Flush a file, or a directory (so a rename into it survives a crash)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
