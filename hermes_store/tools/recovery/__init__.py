"""Damaged files: read them page by page (``pages``), salvage their rows (``salvage``), and
rebuild a new store from what was read (``recover``)."""
