"""The files the agent-file rows run on: the agent's layouts v10, v11, v25 and the document's
schema with our trigram index, each built once per run as an empty template.

The agent's files come from :mod:`tests.support.upstream_schema`, which rebuilds with
the standard library what the agent's own code does to a file (checked there
against files the real code made); nothing of hermes_store builds them, so the
store meets them as it would meet a user's file. The document-plus-trigram
file is the yardstick of our own head file: the document's v6 tables
(:mod:`tests.support.legacy_schema`) and the trigram index as revision 0007 adds it,
without anything our later revisions add.
"""

from __future__ import annotations

from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.legacy_schema import build_legacy_db
from tests.support.upstream_schema import STORE_TRIGRAM_SQL, build_upstream_db

AGENT_VERSIONS = (10, 11, 25)


def settle(path: Path) -> Path:
    """WAL on, the log folded into the file and removed: a template copies as one file."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def agent_template(work: Path, version: int) -> Path:
    """An empty file as the agent's code at ``version`` creates it."""
    path = work / f"agent-v{version}.db"
    if not path.exists():
        build_upstream_db(path, version, seed=False)
        settle(path)
    return path


def doc_trigram_template(work: Path) -> Path:
    """The document's schema version 6 plus our trigram index, and nothing else."""
    path = work / "doc-trigram.db"
    if not path.exists():
        build_legacy_db(path, 6, created_at=6)
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            connection.executescript(STORE_TRIGRAM_SQL)
            connection.execute(
                "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('rebuild')"
            )
        finally:
            connection.close()
        settle(path)
    return path
