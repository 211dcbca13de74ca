"""Fixtures: every test gets its own real state.db under pytest's tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_store import SessionDB


class ManualClock:
    """A clock tests move by hand, so ages and ordering are exact."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.001  # strictly increasing, like successive time.time() calls
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test may touch the real ~/.hermes: HERMES_HOME points into tmp_path."""
    home = tmp_path / "hermes-home"
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.delenv("HERMES_STORE_URL", raising=False)
    return home


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(db_path: Path, clock: ManualClock) -> Iterator[SessionDB]:
    store = SessionDB(db_path, clock=clock)
    try:
        yield store
    finally:
        store.close()
