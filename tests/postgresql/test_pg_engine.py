"""PostgreSQL's rules (``backends.postgresql.engine``): snapshots, read-only readers, patience."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import InternalError
from sqlalchemy.pool import NullPool

from hermes_store import InvalidInputError, SessionDB, StoreLockedError, StoreUnavailableError
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.domain.messages import MessageIn
from tests.conftest import pooled


@pytest.fixture
def other(pg_url: Any) -> Any:
    """A plain connection of another client, outside the store."""
    engine = create_engine(pg_url, poolclass=NullPool)
    connection = engine.connect()
    yield connection
    connection.close()
    engine.dispose()


def test_a_read_unit_sees_one_snapshot(pg_url: Any, pg_route: Any, other: Any) -> None:
    with SessionDB(pg_route(pg_url)) as db:
        db.create_session("s", "cli")
        with db.store.read() as uow:
            assert uow.messages.count() == 0
            with other.begin():
                other.execute(
                    text(
                        "INSERT INTO messages (session_id, role, timestamp) "
                        "VALUES ('s', 'user', 1.0)"
                    )
                )
            assert uow.messages.count() == 0, "a committed write appeared mid-unit"
        assert db.message_count() == 1


def test_a_read_unit_cannot_write(pg_url: Any, pg_route: Any) -> None:
    with SessionDB(pg_route(pg_url)) as db:
        db.create_session("s", "cli")
        with pytest.raises(InternalError, match="read-only"), db.store.read() as uow:
            uow.messages.append("s", MessageIn("user", "a read unit writes nothing"))
        assert db.get_session("s")["message_count"] == 0


def test_a_row_lock_held_past_patience_raises_store_locked_and_writes_nothing(
    pg_url: Any, pg_route: Any, other: Any
) -> None:
    with SessionDB(pg_route(pg_url), policy=ContentionPolicy(patience_s=0.5)) as db:
        db.create_session("s", "cli")
        with other.begin():
            other.execute(text("SELECT * FROM sessions WHERE id = 's' FOR UPDATE"))
            with pytest.raises(StoreLockedError, match="stayed locked"):
                db.append_message("s", "user", "blocked")
        assert db.message_count() == 0
        assert db.get_session("s")["message_count"] == 0
        db.append_message("s", "user", "free again")
        assert db.message_count() == 1


def test_per_unit_patience_overrides_the_policy(pg_url: Any, pg_route: Any, other: Any) -> None:
    with SessionDB(pg_route(pg_url)) as db:  # 30 s by default
        db.create_session("s", "cli")
        with other.begin():
            other.execute(text("SELECT * FROM sessions WHERE id = 's' FOR UPDATE"))
            with (
                pytest.raises(StoreLockedError, match=r"locked .* for 0\.30 s"),
                db.store.write(patience_s=0.3) as uow,
            ):
                uow.messages.append("s", MessageIn("user", "blocked"))
        assert db.get_session("s")["message_count"] == 0


def test_a_counter_past_32_bits_is_invalid_input_and_writes_nothing(pg_url: Any) -> None:
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
        db.update_token_counts("s", input_tokens=2**31 - 10)
        with pytest.raises(InvalidInputError, match="out of range"):
            db.update_token_counts("s", input_tokens=100, output_tokens=1)
        session = db.get_session("s")
        assert (session["input_tokens"], session["output_tokens"]) == (2**31 - 10, 0)


def test_a_cost_sum_past_double_precision_is_named_as_a_cost(pg_url: Any) -> None:
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
        db.update_token_counts("s", estimated_cost_usd=1e308)
        with pytest.raises(InvalidInputError, match="costs and their sums DOUBLE PRECISION"):
            db.update_token_counts("s", estimated_cost_usd=1e308)
        assert db.get_session("s")["estimated_cost_usd"] == 1e308  # type: ignore[index]


def test_a_nul_in_a_lookup_says_nothing_changed(pg_url: Any) -> None:
    with SessionDB(pg_url) as db, pytest.raises(InvalidInputError, match="nothing was changed"):
        db.get_session("a\x00b")


def test_a_bare_postgresql_url_uses_psycopg_3(pg_url: Any) -> None:
    bare = pg_url.set(drivername="postgresql").render_as_string(hide_password=False)
    assert bare.startswith("postgresql://")
    with SessionDB(bare) as db:
        assert db.store.url.drivername == "postgresql+psycopg"
        db.create_session("s", "cli")
        assert db.session_count() == 1


def test_a_read_only_store_begins_read_only_transactions(pg_url: Any, pg_route: Any) -> None:
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
    with SessionDB(pg_route(pg_url), read_only=True) as db, db.store.read() as uow:
        # Set per transaction (``BEGIN ... READ ONLY``), never for the session, so a
        # pooler's server connection lent to the next client carries nothing of it.
        assert uow.connection.exec_driver_sql("SHOW transaction_read_only").scalar_one() == "on"


def test_a_pool_mode_other_than_transaction_or_session_is_named(pg_url: Any) -> None:
    wrong = pg_url.update_query_dict({"pool_mode": "statement"})
    with pytest.raises(InvalidInputError, match="pool_mode='statement'"):
        SessionDB(wrong)


def test_a_pooler_without_pool_mode_is_named_with_the_option(pg_url: Any) -> None:
    """psycopg's own prepared statements cannot cross a transaction pooler's lent connections.

    Two clients take turns: PgBouncer lends both the same server connection,
    where each prepares its ``_pg3_0`` once a statement has run five times
    (a session read: search statements are sent unprepared, for their plans).
    """
    unpooled = pooled(pg_url).difference_update_query(["pool_mode"])
    with SessionDB(pg_url) as db:
        db.create_session("s", "cli")
    first, second = SessionDB(unpooled), SessionDB(unpooled)
    try:
        with pytest.raises(StoreUnavailableError, match=r"\?pool_mode=transaction"):
            for _turn in range(20):
                for db in (first, second):
                    db.get_session("s")
    finally:
        first.close()
        second.close()
