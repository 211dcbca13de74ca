"""The per-call benchmark (``python -m bench``): each store call against plain ``sqlite3``."""
