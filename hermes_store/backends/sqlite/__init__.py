"""SQLite's rules: connection setup, ``BEGIN IMMEDIATE`` with jitter, WAL, the private file."""
