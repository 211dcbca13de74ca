"""``python -m bench.field``: the field-size rows (see ``bench.field.run``)."""

from __future__ import annotations

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
