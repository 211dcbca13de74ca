"""Where the checkout and the support scripts are, for tests at any depth of tests/.

Tests run worker scripts as real processes and point ``PYTHONPATH`` at the
checkout; naming both here keeps a test's location in the tree out of its code.
"""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""tests/support/: the worker scripts run as processes live here."""

REPO = SUPPORT.parents[1]
"""The checkout's root: hermes_store/, migrations/, .ci/, README.md."""
