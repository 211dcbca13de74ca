#!/usr/bin/env bash
# Start a throwaway PostgreSQL 15 server on loopback for the tests, and print its URL.
#
#   eval "$(bash .ci/postgres.sh start DIR [PORT])"   # exports HERMES_TEST_PG_URL
#   bash .ci/postgres.sh stop DIR
#
# The server runs as the `postgres` user (it refuses root) from its own data
# folder under DIR, listens only on 127.0.0.1, trusts local connections, and
# has an empty database `hermes_test`, owned by `postgres`, for pytest. It
# streams its WAL to a hot standby that .ci/standby.sh makes from it.
# Debian's `postgresql` package is installed first if the binaries are missing.
set -euo pipefail

action=${1:?usage: postgres.sh start|stop DIR [PORT]}
dir=${2:?usage: postgres.sh start|stop DIR [PORT]}
port=${3:-55432}

bindir=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/initdb" ] && bindir=$candidate
done
if [ -z "$bindir" ]; then
  echo "installing Debian's postgresql package" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/initdb" ] && bindir=$candidate
  done
fi
[ -n "$bindir" ] || { echo "no PostgreSQL binaries after install" >&2; exit 1; }

as_postgres() { runuser -u postgres -- "$@"; }

case "$action" in
  start)
    mkdir -p "$dir"
    chown postgres "$dir"
    data="$dir/data"
    if [ ! -f "$data/PG_VERSION" ]; then
      as_postgres "$bindir/initdb" -D "$data" -U postgres --auth=trust \
        --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    # A hot standby (.ci/standby.sh) copies this server with pg_basebackup and
    # streams its WAL: replication connections from loopback are trusted.
    hba="$data/pg_hba.conf"
    grep -Eq '^host[[:space:]]+replication[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba" \
      || echo "host replication all 127.0.0.1/32 trust" >>"$hba"
    # Tests run many parallel connections (pytest-xdist workers, contention
    # processes); fsync off: a throwaway server needs speed, not durability.
    # wal_level=replica and WAL senders: the standby's streaming replication.
    as_postgres "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c wal_level=replica -c max_wal_senders=10" \
      start >&2 || { cat "$dir/server.log" >&2; exit 1; }
    as_postgres "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname = 'hermes_test'" | grep -q 1 \
      || as_postgres "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres hermes_test
    echo "export HERMES_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:$port/hermes_test"
    ;;
  stop)
    as_postgres "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    ;;
  *)
    echo "usage: postgres.sh start|stop DIR [PORT]" >&2
    exit 2
    ;;
esac
