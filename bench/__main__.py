"""``python -m bench``: the per-call benchmark of ``bench/micro/`` (see ``bench.micro.run``)."""

from __future__ import annotations

import sys

from .micro.run import main

if __name__ == "__main__":
    sys.exit(main())
