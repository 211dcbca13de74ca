"""The public API says what it does: every public method has a docstring, and those that
list the keys of what they return list the keys they really return."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store, UnitOfWork
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories.maintenance import MaintenanceRepository
from hermes_store.repositories.messages import MessageRepository
from hermes_store.repositories.search import SearchRepository
from hermes_store.repositories.sessions import SessionRepository

DOCUMENTED_CLASSES = (
    SessionDB,
    Store,
    UnitOfWork,
    SessionRepository,
    MessageRepository,
    SearchRepository,
    MaintenanceRepository,
)


def public_methods(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    """The class's own public methods and properties (dunders and ``_private`` left out)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            function = value.fget
        elif isinstance(value, staticmethod | classmethod):
            function = value.__func__
        elif inspect.isfunction(value):
            function = value
        else:
            continue  # a constant such as SessionDB.MAX_TITLE_LENGTH
        assert function is not None, f"{cls.__name__}.{name} is a property without a getter"
        found.append((name, function))
    return found


def test_the_walk_finds_the_public_api() -> None:
    """The walk itself sees the methods it must check (so an empty walk cannot pass)."""
    names = {cls.__name__: {name for name, _ in public_methods(cls)} for cls in DOCUMENTED_CLASSES}
    assert {"append_message", "get_ancestors", "store", "sanitize_title"} <= names["SessionDB"]
    assert {"read", "write", "transact", "layout"} <= names["Store"]
    assert {"orm", "sessions", "messages", "search", "commit"} <= names["UnitOfWork"]
    assert {"create", "get", "exists", "ancestors"} <= names["SessionRepository"]
    assert {"append", "append_many", "for_session"} <= names["MessageRepository"]
    assert {"search", "match", "context"} <= names["SearchRepository"]
    assert sum(len(found) for found in names.values()) > 90


@pytest.mark.parametrize("cls", DOCUMENTED_CLASSES, ids=lambda cls: cls.__name__)
def test_every_public_method_has_a_docstring(cls: type) -> None:
    missing = [
        name for name, function in public_methods(cls) if not (function.__doc__ or "").strip()
    ]
    assert not missing, f"{cls.__name__} methods without a docstring: {missing}"


def documented_keys(function: Callable[..., Any]) -> list[str]:
    """The keys a docstring lists as ````a, b, c```` (the first such comma list)."""
    doc = inspect.getdoc(function) or ""
    for literal in re.findall(r"``([^`]+)``", doc, flags=re.S):
        if "," in literal:
            return [key.strip() for key in literal.split(",")]
    raise AssertionError(f"{function.__qualname__}'s docstring lists no keys")


@pytest.fixture
def filled(tmp_path: Path) -> SessionDB:
    """A store with a parent, a child, messages, usage: every listed key has a value."""
    db = SessionDB(tmp_path / "state.db")
    db.create_session("root", "cli", model="m1")
    db.create_session("child", "cli", model="m1", parent_session_id="root")
    db.append_message("root", "user", "the docker build fails")
    db.append_message("root", "assistant", "prune docker images", tool_calls=[{"id": "c1"}])
    db.append_message("root", "tool", "freed 3 GB", tool_name="terminal", tool_call_id="c1")
    db.update_token_counts("root", input_tokens=10, output_tokens=5, estimated_cost_usd=0.1)
    return db


def test_listed_keys_are_the_returned_keys(filled: SessionDB) -> None:
    """``get_ancestors`` once documented a key ``parent``: the key is ``parent_session_id``."""
    cases: list[tuple[Callable[..., Any], list[dict[str, Any]]]] = [
        (SessionDB.get_ancestors, filled.get_ancestors("child")),
        (SessionDB.get_descendants, filled.get_descendants("root")),
        (SessionDB.token_usage_by_model, filled.token_usage_by_model()),
        (SessionDB.top_sessions_by_tokens, filled.top_sessions_by_tokens(5)),
        (SessionDB.search_messages, filled.search_messages("docker")),
    ]
    with filled.store.read() as uow:
        matches = uow.search.match(uow.search.word_query(["docker"]))
        cases.append((SearchRepository.match, matches))
    path = filled.db_path
    filled.close()
    # A real orphan for the foreign-key check: written with the checks off, as a
    # damaged or hand-edited file has it.
    assert path is not None
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute("PRAGMA foreign_keys = OFF")
        raw.execute("INSERT INTO messages (session_id, role, timestamp) VALUES ('gone', 'user', 1)")
    store = Store(path)
    with store.read() as uow:
        orphans = MaintenanceRepository(uow.connection, uow.layout).foreign_key_problems()
    store.close()
    cases.append((MaintenanceRepository.foreign_key_problems, orphans))
    for function, rows in cases:
        assert rows, f"{function.__qualname__} returned nothing to compare"
        for row in rows:
            assert list(row) == documented_keys(function), function.__qualname__
