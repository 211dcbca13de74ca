"""Read replicas (``read_url``): reads on a real hot standby, writes on the primary, fallbacks.

The standby is the one ``.ci/standby.sh`` made with ``pg_basebackup -R`` from
the test server; which server answered a unit is asked of the unit's own
connection (``pg_is_in_recovery()`` is true on the standby only). Stopping
the standby and pausing its replay are real (``pg_ctl stop``,
``pg_wal_replay_pause()``), under :func:`tests.support.standby.standby_for`'s lock.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

from hermes_store import InvalidInputError, SessionDB, Store, UnitOfWork
from hermes_store.aio import AsyncSessionDB, AsyncStore
from hermes_store.backends import read_route
from hermes_store.backends.read_route import ReadRoute, ReplicaReading, ReplicaState
from tests.support.standby import REPO, Standby, standby_for


def _on_standby(uow: UnitOfWork) -> bool:
    """Whether the unit runs on the standby (a server in recovery), asked of its connection."""
    return bool(uow.connection.execute(text("SELECT pg_is_in_recovery()")).scalar())


def _url(url: URL) -> str:
    return url.render_as_string(hide_password=False)


STANDBY_PATIENCE_S = 60.0
"""How long a test waits for reads to go to a caught-up standby again."""


def _until_on_standby(standby: Standby, read: Callable[[], bool]) -> None:
    """Call ``read`` (a read unit: was it on the standby?) until it is, catching up between.

    The route measures a standby that has not replayed the primary's newest WAL
    by the time since the last commit it replayed: other tests' writes to the
    shared server (a long transaction, or one after a quiet spell) can make a
    caught-up standby read as lagging until the next probe. A fixed pause
    cannot wait that out; polling within a generous bound can.
    """
    deadline = time.monotonic() + STANDBY_PATIENCE_S
    while not read():
        assert time.monotonic() < deadline, "reads never went to the caught-up standby"
        standby.caught_up()
        time.sleep(0.05)


async def _until_on_standby_async(standby: Standby, read: Callable[[], Awaitable[bool]]) -> None:
    """:func:`_until_on_standby` for reads awaited on the loop."""
    deadline = time.monotonic() + STANDBY_PATIENCE_S
    while not await read():
        assert time.monotonic() < deadline, "reads never went to the caught-up standby"
        await asyncio.to_thread(standby.caught_up)
        await asyncio.sleep(0.05)


@pytest.fixture
def standby(pg_url: URL, monkeypatch: pytest.MonkeyPatch) -> Iterator[Standby]:
    """The standby of this test's database, caught up, held by this test alone."""
    # Writes of earlier tests in this process would count as this one's (read-your-writes).
    monkeypatch.setattr(read_route, "_last_writes", {})
    with standby_for(pg_url) as held:
        yield held


def _add(url: URL, session_id: str, words: str) -> None:
    """A write by another program: a store without read_url, so not this route's own."""
    with SessionDB(_url(url)) as db:
        if db.get_session(session_id) is None:
            db.create_session(session_id, "cli")
        db.append_message(session_id, "user", words)


def test_reads_go_to_the_standby_and_writes_to_the_primary(standby: Standby) -> None:
    _add(standby.primary, "s1", "replicated words")
    standby.caught_up()
    with Store(standby.primary, read_url=standby.url) as store:

        def search_on_standby() -> bool:
            with store.read() as uow:
                assert [hit.session_id for hit in uow.search.search("replicated")] == ["s1"]
                return _on_standby(uow)

        _until_on_standby(standby, search_on_standby)
        with store.write() as uow:
            assert not _on_standby(uow)


def test_a_read_right_after_this_process_wrote_goes_to_the_primary(standby: Standby) -> None:
    with SessionDB(_url(standby.primary), read_url=_url(standby.url), max_replica_lag=1.0) as db:
        _until_on_standby(standby, lambda: _read_on_standby(db.store))
        db.create_session("mine", "cli")
        db.append_message("mine", "user", "read your own writes")
        with db.store.read() as uow:
            assert not _on_standby(uow)  # within the bound of its own write
        assert db.get_messages("mine")[0]["content"] == "read your own writes"
        time.sleep(1.1)  # the bound of its own write has passed
        standby.caught_up()
        _until_on_standby(standby, lambda: _read_on_standby(db.store))
        assert db.message_count("mine") == 1


def test_a_stopped_standby_falls_back_to_the_primary(standby: Standby) -> None:
    _add(standby.primary, "s1", "before the stop")
    standby.caught_up()
    with SessionDB(_url(standby.primary), read_url=_url(standby.url)) as db:
        # This thread now keeps a connection to it.
        _until_on_standby(standby, lambda: _read_on_standby(db.store))
        standby.stop()
        _add(standby.primary, "s1", "while it was down")
        with db.store.read() as uow:  # no error: the primary answers
            assert not _on_standby(uow)
        assert [m["content"] for m in db.get_messages("s1")] == [
            "before the stop",
            "while it was down",
        ]
        route = db.store.read_route
        assert route is not None and route.reading().state is ReplicaState.DOWN
        standby.start()
        standby.caught_up()
        time.sleep(route.recheck_s)  # the next probe finds it up again
        _until_on_standby(standby, lambda: _read_on_standby(db.store))


def test_a_standby_lagging_past_the_bound_falls_back_to_the_primary(standby: Standby) -> None:
    _add(standby.primary, "s1", "replayed")
    standby.caught_up()
    with (
        Store(standby.primary, read_url=standby.url, max_replica_lag=0.5) as strict,
        Store(standby.primary, read_url=standby.url, max_replica_lag=3600) as patient,
    ):
        standby.pause_replay()
        _add(standby.primary, "s1", "not replayed")
        time.sleep(1.2)  # past the bound, and past the last probe's recheck
        with strict.read() as uow:
            assert not _on_standby(uow)
            assert uow.messages.count("s1") == 2
        assert strict.read_route is not None
        reading = strict.read_route.reading()
        assert reading.state is ReplicaState.LAGGING
        assert reading.lag_s is not None and reading.lag_s > 0.5
        with patient.read() as uow:  # the same standby, within a looser bound: it answers
            assert _on_standby(uow)
            assert uow.messages.count("s1") == 1  # replay really is paused
        standby.resume_replay()
        standby.caught_up()
        time.sleep(strict.read_route.recheck_s)

        def both_on_standby() -> bool:
            with strict.read() as uow:
                return _on_standby(uow) and uow.messages.count("s1") == 2

        _until_on_standby(standby, both_on_standby)


def test_the_asyncio_twins_read_from_the_standby_and_fall_back(standby: Standby) -> None:
    _add(standby.primary, "s1", "asyncio words")
    standby.caught_up()

    async def main() -> None:
        async with (
            await AsyncStore.open(standby.primary, read_url=standby.url) as store,
            await AsyncSessionDB.open(
                _url(standby.primary), read_url=_url(standby.url), max_replica_lag=0.5
            ) as db,
        ):
            await _until_on_standby_async(standby, lambda: store.read(_on_standby))
            hits = await db.search_messages("asyncio")
            assert [hit["session_id"] for hit in hits] == ["s1"]
            await _until_on_standby_async(
                standby, lambda: asyncio.to_thread(_read_on_standby, db.store)
            )
            await store.transact(lambda uow: uow.sessions.create("a1", "cli"))
            assert not await store.read(_on_standby)  # its own write, just now
            standby.pause_replay()
            _add(standby.primary, "s1", "asyncio after the pause")
            await asyncio.sleep(1.2)
            assert not await asyncio.to_thread(_read_on_standby, db.store)
            assert len(await db.get_messages("s1")) == 2

    asyncio.run(main())


def _read_on_standby(store: Store) -> bool:
    with store.read() as uow:
        return _on_standby(uow)


def _cli(
    tmp_path: Path, *args: str, read_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HERMES_STORE_")},
        "HERMES_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
    }
    if read_url is not None:
        env["HERMES_STORE_READ_URL"] = read_url
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _hits(tmp_path: Path, *args: str, read_url: str | None = None) -> list[str]:
    done = _cli(tmp_path, "search", *args, "--json", read_url=read_url)
    assert done.returncode == 0, done.stderr
    return [hit["snippet"].replace(">>>", "").replace("<<<", "") for hit in json.loads(done.stdout)]


def test_the_cli_reads_from_the_standby_until_it_lags_or_stops(
    standby: Standby, tmp_path: Path
) -> None:
    primary, replica = _url(standby.primary), _url(standby.url)
    _add(standby.primary, "s1", "fleet first")
    standby.caught_up()
    standby.pause_replay()
    _add(standby.primary, "s1", "fleet second")
    time.sleep(0.6)
    # Within a loose bound the paused standby answers, without the second message:
    # the command read from it, not from the primary.
    loose = ("fleet", "--url", primary, "--max-replica-lag", "3600")
    assert _hits(tmp_path, *loose, "--read-url", replica) == ["fleet first"]
    assert _hits(tmp_path, *loose, read_url=replica) == ["fleet first"]  # $HERMES_STORE_READ_URL
    # Past a tight bound the primary answers.
    tight = ("fleet", "--url", primary, "--read-url", replica, "--max-replica-lag", "0.2")
    assert sorted(_hits(tmp_path, *tight)) == ["fleet first", "fleet second"]
    standby.stop()
    assert sorted(_hits(tmp_path, *loose, "--read-url", replica)) == [
        "fleet first",
        "fleet second",
    ]
    shown = _cli(tmp_path, "show", "s1", "--url", primary, "--read-url", replica, "--json")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["messages"]) == 2


def test_sqlite_refuses_a_read_url_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with pytest.raises(InvalidInputError, match="SQLite store has no read replicas"):
        Store(path, read_url=tmp_path / "replica.db")
    with pytest.raises(InvalidInputError, match="SQLite store has no read replicas"):
        SessionDB(path, read_url=str(tmp_path / "replica.db"))
    assert not path.exists()
    SessionDB(path).close()
    done = _cli(tmp_path, "sessions", "--db", str(path), "--read-url", "sqlite:////tmp/x.db")
    assert done.returncode == 1
    assert "no read replicas" in done.stderr and "Traceback" not in done.stderr
    # The environment's replica is a server store's: a SQLite command ignores it.
    quiet = _cli(tmp_path, "sessions", "--db", str(path), read_url="postgresql://h/db")
    assert quiet.returncode == 0, quiet.stderr


def test_a_read_url_of_another_backend_or_the_store_itself_is_refused(tmp_path: Path) -> None:
    server = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    with pytest.raises(InvalidInputError, match="read_url is a sqlite URL"):
        Store(server, read_url=tmp_path / "replica.db")
    with pytest.raises(InvalidInputError, match="names the store itself"):
        Store(server, read_url=server)
    with pytest.raises(InvalidInputError, match="max_replica_lag must be >= 0"):
        Store(tmp_path / "state.db", max_replica_lag=-1)
    with (
        Store(tmp_path / "state.db") as store,
        pytest.raises(InvalidInputError, match="read_url and max_replica_lag"),
    ):
        SessionDB(store=store, read_url=server)
    assert not (tmp_path / "replica.db").exists()


def test_the_route_probes_once_per_recheck_and_keeps_reads_after_a_write_on_the_primary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route's own rules, on a clock the test moves (the probe is a plain function)."""
    monkeypatch.setattr(read_route, "_last_writes", {})
    now = [100.0]
    probes: list[float] = []
    answer = [ReplicaReading(ReplicaState.OK, 0.0)]

    def measure(bound: float) -> ReplicaReading:
        probes.append(bound)
        return answer[0]

    engine = create_engine(f"sqlite:///{tmp_path / 'unused.db'}")
    route = ReadRoute(engine, measure, primary_key="p", max_lag_s=2.0, clock=lambda: now[0])
    assert route.use_replica() and route.use_replica()
    assert probes == [2.0]  # one probe within the recheck
    route.note_write()
    now[0] += 1.9
    assert not route.use_replica()  # its own write, within the bound
    now[0] += 0.2
    assert route.use_replica() and len(probes) == 2  # past it: probed again, the replica
    answer[0] = ReplicaReading(ReplicaState.LAGGING, 9.0)
    assert route.use_replica()  # the old reading holds until the recheck
    now[0] += 1.0
    assert not route.use_replica()
    answer[0] = ReplicaReading(ReplicaState.OK, 0.0)
    route.note_down(ConnectionRefusedError("refused"))
    assert route.reading() == ReplicaReading(ReplicaState.DOWN, None, "refused")
    assert not route.use_replica()
    now[0] += 1.0
    assert route.use_replica()
    other = ReadRoute(engine, measure, primary_key="p", max_lag_s=2.0, clock=lambda: now[0])
    route.note_write()  # the same primary's writes count for every route on it
    assert not other.use_replica()
    assert not (tmp_path / "unused.db").exists()
    with pytest.raises(InvalidInputError, match="max_replica_lag must be a number"):
        ReadRoute(engine, measure, primary_key="p", max_lag_s="5")  # type: ignore[arg-type]


def test_a_read_url_naming_another_database_is_never_read_from(pg_url: URL) -> None:
    """Before, a database that is not in recovery counted as a current replica whatever it
    was, so a ``read_url`` naming another store served that store's sessions as this one's."""
    from tests.conftest import create_pg_database, drop_pg_database

    elsewhere = create_pg_database(pg_url.set(database="postgres"), "elsewhere")
    try:
        with SessionDB(_url(elsewhere)) as other:
            other.create_session("theirs", "cli")
            other.append_message("theirs", "user", "words of another store")
        _add(pg_url, "mine", "words of this store")
        with SessionDB(_url(pg_url), read_url=_url(elsewhere)) as db:
            assert [s["id"] for s in db.list_sessions_rich()] == ["mine"]
            assert [h["session_id"] for h in db.search_messages("words")] == ["mine"]
            route = db.store.read_route
            assert route is not None
            reading = route.reading()
            assert reading.state is ReplicaState.DOWN
            assert "not a replica" in reading.detail and str(elsewhere.database) in reading.detail
        # The primary itself, named another way, is still a current "replica".
        itself = pg_url.set(host="localhost" if pg_url.host != "localhost" else "127.0.0.1")
        with Store(pg_url, read_url=itself) as store:
            assert store.read_route is not None
            assert store.read_route.reading().state is ReplicaState.OK
    finally:
        drop_pg_database(elsewhere)
