"""PostgreSQL's kept totals (revision 0017; issue #28, item 3).

``message_count()`` and ``token_usage_by_model()`` read totals kept by
statement-level triggers in stripes; every test compares them with the
exact aggregates over the tables, after appends, deletes, a prune, writers
in several real processes, a disabled trigger and a damaged total.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB, Store
from hermes_store.backends.postgresql import totals
from hermes_store.tools.check import check

_EXACT_USAGE = """
    SELECT model, COUNT(*) AS session_count, SUM(input_tokens) AS total_input,
           SUM(output_tokens) AS total_output, SUM(estimated_cost_usd) AS total_cost
    FROM sessions WHERE model IS NOT NULL GROUP BY model
    ORDER BY total_cost DESC NULLS LAST, model
"""


_CLI = "import sys; from hermes_store.cli import main; sys.argv[0] = 'hermes-store'; main()"


def _plain(url: URL) -> str:
    return url.render_as_string(hide_password=False)


@pytest.fixture
def admin(pg_url: Any) -> Iterator[Engine]:
    engine = create_engine(pg_url, poolclass=NullPool)
    yield engine
    engine.dispose()


def _exact(engine: Engine) -> tuple[int, list[dict[str, Any]]]:
    with engine.connect() as connection:
        count = connection.execute(text("SELECT COUNT(*) FROM messages")).scalar_one()
        usage = [dict(row) for row in connection.execute(text(_EXACT_USAGE)).mappings()]
    return count, usage


def _kept(engine: Engine) -> tuple[int | None, list[dict[str, Any]] | None]:
    with engine.connect() as connection:
        return totals.kept_message_count(connection), totals.kept_usage(connection)


def _same_usage(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [row["model"] for row in got] == [row["model"] for row in want]
    for a, b in zip(got, want, strict=True):
        assert a["session_count"] == b["session_count"]
        assert a["total_input"] == b["total_input"] and a["total_output"] == b["total_output"]
        if b["total_cost"] is None:
            assert a["total_cost"] is None
        else:
            assert a["total_cost"] == pytest.approx(b["total_cost"], rel=1e-12)


def _assert_kept_right(url: Any, engine: Engine) -> None:
    count, usage = _exact(engine)
    kept_count, kept_usage = _kept(engine)
    assert kept_count == count, (kept_count, count)  # read from the kept rows, not counted
    assert kept_usage is not None
    _same_usage(kept_usage, usage)
    with SessionDB(url) as db:
        assert db.message_count() == count
        _same_usage(db.token_usage_by_model(), usage)
    with Store(url) as store:
        assert check(store).totals == []


def _fill(db: SessionDB, sessions: int, messages: int) -> None:
    for n in range(sessions):
        sid = f"s{n}"
        db.create_session(sid, "cli", model=f"model-{n % 3}" if n % 4 else None)
        for m in range(messages):
            db.append_message(sid, "user" if m % 2 else "assistant", f"message {m} of {sid}")
        cost = 0.1 * n + 0.001 * n * n  # no two models tie on cost (order is by cost)
        db.update_token_counts(sid, input_tokens=10 * n, output_tokens=n, estimated_cost_usd=cost)


def test_appends_usage_and_deletes_keep_both_totals(pg_url: Any, admin: Engine) -> None:
    with SessionDB(pg_url) as db:
        _fill(db, 12, 5)
        db.append_messages("s1", [{"role": "user", "content": f"batch {k}"} for k in range(30)])
        db.update_token_counts("s3", model="other", input_tokens=7)  # model kept: s3 has one
        db.update_token_counts("s5", input_tokens=99, output_tokens=1, absolute=True)
    _assert_kept_right(pg_url, admin)
    with SessionDB(pg_url) as db:
        db.clear_messages("s2")
        assert db.delete_session("s5")
        assert db.delete_session("s0")  # no model
    _assert_kept_right(pg_url, admin)


def test_a_prune_keeps_both_totals(pg_url: Any, admin: Engine) -> None:
    with SessionDB(pg_url) as db:
        _fill(db, 10, 4)
        for n in range(10):
            db.end_session(f"s{n}", "done")
    with admin.begin() as connection:  # the older half ended long ago
        connection.execute(
            text(
                "UPDATE sessions SET started_at = 1, ended_at = 2 "
                "WHERE id IN ('s0', 's1', 's2', 's3', 's4')"
            )
        )
    with SessionDB(pg_url) as db:
        assert db.prune_sessions(older_than_days=1) == 5
    _assert_kept_right(pg_url, admin)
    assert _exact(admin)[0] == 20


_WRITER = """
import sys
from hermes_store import SessionDB
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SessionDB(url) as db:
    db.create_session(name, "cli", model="shared-model")
    for k in range(n):
        db.append_message(name, "user", f"{name} {k}")
        if k % 10 == 0:
            db.update_token_counts(name, input_tokens=3, output_tokens=2, estimated_cost_usd=0.01)
"""


def test_writers_in_several_processes_keep_exact_totals_in_stripes(
    pg_url: Any, admin: Engine
) -> None:
    url = _plain(pg_url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, f"w{k}", "120"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(6)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    _assert_kept_right(pg_url, admin)
    assert _exact(admin)[0] == 720
    with admin.connect() as connection:  # six connections wrote: more than one stripe holds some
        stripes = connection.execute(
            text("SELECT COUNT(*) FROM message_total WHERE messages <> 0")
        ).scalar_one()
    assert stripes > 1


def test_a_disabled_trigger_sends_readers_to_the_tables_and_repair_restores_it(
    pg_url: Any, admin: Engine
) -> None:
    with SessionDB(pg_url) as db:
        _fill(db, 4, 3)
    with admin.begin() as connection:
        connection.execute(text("ALTER TABLE messages DISABLE TRIGGER message_total_insert"))
        connection.execute(text("ALTER TABLE sessions DISABLE TRIGGER model_usage_totals_update"))
    with SessionDB(pg_url) as db:
        db.append_message("s1", "user", "unseen by the totals")
        db.update_token_counts("s1", input_tokens=1000, estimated_cost_usd=5.0)
        count, usage = _exact(admin)
        assert _kept(admin) == (None, None)  # not trusted
        assert db.message_count() == count == 13
        _same_usage(db.token_usage_by_model(), usage)
    with Store(pg_url) as store:
        found = check(store)
        assert any("message_total_insert" in line for line in found.totals), found.totals
        assert any("12 messages, there are 13" in line for line in found.totals), found.totals
        repaired = check(store, repair=True)
        assert repaired.repaired_totals and repaired.ok
    _assert_kept_right(pg_url, admin)
    with SessionDB(pg_url) as db:  # the triggers fire again
        db.append_message("s2", "user", "seen again")
    _assert_kept_right(pg_url, admin)


def test_check_reports_drift_and_repair_rebuilds_the_totals(pg_url: Any, admin: Engine) -> None:
    with SessionDB(pg_url) as db:
        _fill(db, 5, 2)
    with admin.begin() as connection:
        connection.execute(text("UPDATE message_total SET messages = messages + 5"))
        connection.execute(text("UPDATE model_usage_totals SET input_sum = input_sum + 1"))
    with Store(pg_url) as store:
        found = check(store).totals
        assert len(found) >= 2 and any("message_total says" in line for line in found), found
    done = subprocess.run(
        [sys.executable, "-c", _CLI, "check", "--repair", "--url", _plain(pg_url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    _assert_kept_right(pg_url, admin)


def test_the_reports_read_the_totals_in_constant_work(pg_url: Any, admin: Engine) -> None:
    """The kept count is a sum over at most 16 rows, whatever the number of messages."""
    with SessionDB(pg_url) as db:
        db.create_session("big", "cli", model="m")
    with admin.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "SELECT 'big', 'user', 'row ' || n, n FROM generate_series(1, 30000) AS n"
            )
        )
        rows = connection.execute(text("SELECT COUNT(*) FROM message_total")).scalar_one()
    assert rows <= totals.STRIPES
    with admin.connect() as connection:
        plan = "\n".join(
            connection.execute(text("EXPLAIN " + str(totals.KEPT_MESSAGE_COUNT))).scalars()
        )
    assert "messages " not in plan.replace("message_total", ""), plan
    _assert_kept_right(pg_url, admin)


def test_the_kept_usage_report_gives_ints_as_the_aggregate_and_sqlite_do(pg_url: Any) -> None:
    """PostgreSQL's SUM of BIGINT stripes is NUMERIC: read raw it came back as Decimal, and
    ``hermes-store stats --json`` printed the counts and token totals as strings."""
    with SessionDB(pg_url) as db:
        _fill(db, 6, 1)
        rows = db.token_usage_by_model()
    assert rows
    for row in rows:
        for name in ("session_count", "total_input", "total_output"):
            assert type(row[name]) is int, (name, row[name])
        assert type(row["total_cost"]) is float
