#!/usr/bin/env bash
# Start a throwaway PgBouncer in transaction-pooling mode in front of the test
# server, and print its URL.
#
#   eval "$(bash .ci/pgbouncer.sh start DIR PORT SERVER_PORT)"   # exports HERMES_TEST_PGBOUNCER_URL
#   bash .ci/pgbouncer.sh stop DIR
#
# It is how a fleet of agent processes usually reaches one PostgreSQL: every
# database of the server at 127.0.0.1:SERVER_PORT is served at 127.0.0.1:PORT,
# a server connection is lent for one transaction at a time, and nothing a
# client sets for its session (startup options, SET, prepared statements)
# survives to its next transaction. Debian's `pgbouncer` package is installed
# first if it is missing. It runs as `postgres` (it refuses root).
set -euo pipefail

action=${1:?usage: pgbouncer.sh start|stop DIR [PORT SERVER_PORT]}
dir=${2:?usage: pgbouncer.sh start|stop DIR [PORT SERVER_PORT]}
port=${3:-56432}
server_port=${4:-55432}

case "$action" in
  start)
    if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
      echo "installing Debian's pgbouncer package" >&2
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >&2
    fi
    bouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
    mkdir -p "$dir"
    echo '"postgres" ""' >"$dir/users.txt"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$server_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 40
max_db_connections = 120
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    chown -R postgres "$dir"
    runuser -u postgres -- "$bouncer" -d "$dir/pgbouncer.ini" >&2
    for _ in $(seq 50); do
      if runuser -u postgres -- psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAc 'SELECT 1' >/dev/null 2>&1; then
        echo "export HERMES_TEST_PGBOUNCER_URL=postgresql+psycopg://postgres@127.0.0.1:$port/hermes_test"
        exit 0
      fi
      sleep 0.2
    done
    cat "$dir/pgbouncer.log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$dir/pgbouncer.pid" ]; then
      kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    fi
    ;;
  *)
    echo "usage: pgbouncer.sh start|stop DIR [PORT SERVER_PORT]" >&2
    exit 2
    ;;
esac
