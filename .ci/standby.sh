#!/usr/bin/env bash
# Start a throwaway hot standby of the test server, and print its URL.
#
#   eval "$(bash .ci/standby.sh start DIR PORT PRIMARY_PORT)"   # exports HERMES_TEST_PG_STANDBY_URL (and _DIR)
#   bash .ci/standby.sh stop DIR
#
# The standby is a copy of the server at 127.0.0.1:PRIMARY_PORT (started by
# .ci/postgres.sh, which allows replication from loopback) made with
# `pg_basebackup -R`: it streams the primary's WAL, replays it, and answers
# read-only queries meanwhile (hot standby), as a read replica in a
# deployment does. The tests of read_url read from it, stop it and pause its
# replay. It runs as the `postgres` user (PostgreSQL refuses root).
set -euo pipefail

action=${1:?usage: standby.sh start|stop DIR [PORT PRIMARY_PORT]}
dir=${2:?usage: standby.sh start|stop DIR [PORT PRIMARY_PORT]}
port=${3:-55532}
primary_port=${4:-55432}

bindir=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/pg_basebackup" ] && bindir=$candidate
done
[ -n "$bindir" ] || { echo "no PostgreSQL binaries: run .ci/postgres.sh first" >&2; exit 1; }

as_postgres() { runuser -u postgres -- "$@"; }

case "$action" in
  start)
    mkdir -p "$dir"
    chown postgres "$dir"
    data="$dir/data"
    if [ ! -f "$data/PG_VERSION" ]; then
      # A replication slot of its own keeps on the primary the WAL this standby
      # has not received yet: the tests stop it while the suite goes on writing,
      # and without the slot a checkpoint may recycle what it needs to catch up.
      slot="hermes_standby_$port"
      as_postgres "$bindir/psql" -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -qtAc \
        "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null
      # -R writes standby.signal, primary_conninfo and primary_slot_name; -X stream
      # copies the WAL written during the copy, so the standby starts consistent.
      as_postgres "$bindir/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres \
        -D "$data" -R -X stream -C -S "$slot" -c fast >"$dir/basebackup.log" 2>&1 \
        || { cat "$dir/basebackup.log" >&2; exit 1; }
    fi
    # A hot standby needs max_connections at least the primary's (300). Queries
    # that hold replay back are cancelled after a second: a test's paused or
    # lagging replica is made on purpose, never by a reader.
    as_postgres "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c fsync=off -c hot_standby=on -c max_standby_streaming_delay=1s" \
      start >&2 || { cat "$dir/server.log" >&2; exit 1; }
    echo "export HERMES_TEST_PG_STANDBY_URL=postgresql+psycopg://postgres@127.0.0.1:$port/hermes_test"
    echo "export HERMES_TEST_PG_STANDBY_DIR=$dir"
    ;;
  stop)
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    ;;
  *)
    echo "usage: standby.sh start|stop DIR [PORT PRIMARY_PORT]" >&2
    exit 2
    ;;
esac
