"""``python -m bench.field.upgrade --url postgresql+psycopg://.../anything [--messages N]``

Issue #28, item 5: a populated PostgreSQL store at revision 0013 brought to
head by ``hermes-store upgrade --url`` while a writer keeps appending. The
store is made on the server (sessions and messages with words of a small
vocabulary, by ``generate_series``), stopped at 0013; then a writer process
appends one message per transaction (INSERT and the session's counter, as an
append does) as fast as it can, timing each, and the upgrade runs. Printed:
the upgrade's per-step lines and total, and the writer's appends, median,
p99 and longest wait -- the time writers are blocked -- with the load.

``--existing``: upgrade the store at ``--url`` as it is (a copy of the field
corpus, say) instead of making one; the writer appends to a session of its
own, deleted with its messages when the upgrade is done, so the store's rows
are what they were.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url

from hermes_store.backends import create_store_engine
from hermes_store.schema.migrate import upgrade

from ..paths import REPO_ROOT

_WRITER = """
import sys, time
from pathlib import Path
import psycopg
url, stop, out, session = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
waits = []
with psycopg.connect(url, autocommit=False) as c:
    n = 0
    while not stop.exists():
        t = time.perf_counter()
        c.execute("INSERT INTO messages (session_id, role, content, timestamp) "
                  "VALUES (%s, 'user', %s, %s)", (session, f"live append {n}", time.time()))
        c.execute("UPDATE sessions SET message_count = message_count + 1 WHERE id = %s",
                  (session,))
        c.commit()
        waits.append(time.perf_counter() - t)
        n += 1
out.write_text("\\n".join(f"{w:.6f}" for w in waits))
"""


WRITER_SESSION = "upgrade-bench-writer"


def _writer_session(url: URL, *, add: bool) -> None:
    """Make the writer's session in an existing store, or delete it and its messages."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            if add:
                connection.execute(
                    text(
                        "INSERT INTO sessions (id, source, started_at, message_count) "
                        "VALUES (:s, 'bench', 0, 0) ON CONFLICT (id) DO NOTHING"
                    ),
                    {"s": WRITER_SESSION},
                )
            else:
                connection.execute(
                    text("DELETE FROM messages WHERE session_id = :s"), {"s": WRITER_SESSION}
                )
                connection.execute(
                    text("DELETE FROM sessions WHERE id = :s"), {"s": WRITER_SESSION}
                )
    finally:
        engine.dispose()


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _populated(server: URL, messages: int) -> URL:
    admin = create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text('DROP DATABASE IF EXISTS "upgrade_bench" WITH (FORCE)'))
            connection.execute(text('CREATE DATABASE "upgrade_bench"'))
    finally:
        admin.dispose()
    url = server.set(database="upgrade_bench")
    engine = create_store_engine(url)
    sessions = max(messages // 20, 1)
    try:
        upgrade(engine, "0013")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO sessions (id, source, started_at, model, input_tokens, "
                    "estimated_cost_usd, message_count) SELECT 's' || n, 'cli', n, "
                    "'model-' || (n % 5), n, n / 1000.0, 20 FROM generate_series(1, :s) AS n"
                ),
                {"s": sessions},
            )
            connection.execute(
                text(
                    "INSERT INTO messages (session_id, role, content, timestamp) "
                    "SELECT 's' || (1 + n % :s), CASE WHEN n % 2 = 0 THEN 'user' "
                    "ELSE 'assistant' END, "
                    "'the deploy of build ' || n || ' failed with error ' || (n % 97) || "
                    "' on host web' || (n % 13) || ' retry rollout cron docker kubernetes "
                    "config ' || md5(n::text), n FROM generate_series(1, :m) AS n"
                ),
                {"s": sessions, "m": messages},
            )
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))
    finally:
        engine.dispose()
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.field.upgrade", description=__doc__)
    parser.add_argument("--url", required=True, help="a server URL (a database is made on it)")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--existing", action="store_true", help="upgrade the store at --url")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.existing:
        url, session = make_url(args.url), WRITER_SESSION
        _writer_session(url, add=True)
    else:
        url, session = _populated(make_url(args.url), args.messages), "s1"
        print(f"made {args.messages:,} messages at 0013 in {time.perf_counter() - started:.0f} s")
    plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
    stop, out = Path(f"/tmp/upgrade-bench-{os.getpid()}.stop"), Path(f"/tmp/ub-{os.getpid()}")
    stop.unlink(missing_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, plain, str(stop), str(out), session])
    time.sleep(2)  # the writer's steady state before the upgrade
    load = _load()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hermes_store.cli",
            "upgrade",
            "--url",
            url.render_as_string(hide_password=False),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    time.sleep(2)
    stop.touch()
    writer.wait()
    stop.unlink(missing_ok=True)
    if args.existing:
        _writer_session(url, add=False)
    waits = sorted(float(line) for line in out.read_text().split())
    out.unlink(missing_ok=True)
    print(done.stderr.strip())
    print(done.stdout.strip())
    p99 = waits[int(0.99 * (len(waits) - 1))]
    print(
        f"writer: {len(waits):,} appends, median {1000 * statistics.median(waits):.1f} ms, "
        f"p99 {1000 * p99:.1f} ms, longest wait {waits[-1]:.2f} s; "
        f"load {load} before, {_load()} after"
    )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
