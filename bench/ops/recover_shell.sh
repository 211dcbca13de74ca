#!/usr/bin/env bash
# Build a sqlite3 shell whose .recover works, for the salvage comparison.
#
# Debian's sqlite3 shell is built without the sqlite_dbpage table, and its
# .recover fails with "SQL logic error" on every file. The SQLite sources
# (the amalgamation: sqlite3.c and shell.c) ship inside the npm registry's
# `sqlite3` package; this compiles them with sqlite_dbpage on and prints the
# shell's path. Tests and `python -m bench.ops.recover` use it through
# $HERMES_SQLITE3_SHELL. Needs npm and a C compiler; prints nothing and
# exits 1 when it cannot build one.
set -euo pipefail
out="${1:-$(dirname "$0")/../.work/sqlite3-recover}"
if [ -x "$out" ] && "$out" :memory: "select count(*) from sqlite_dbpage" >/dev/null 2>&1; then
  echo "$out"; exit 0
fi
command -v npm >/dev/null && command -v cc >/dev/null || exit 1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent sqlite3@6.0.1 >/dev/null 2>&1 && tar xzf sqlite3-*.tgz) || exit 1
tar xzf "$work"/package/deps/sqlite-autoconf-*.tar.gz -C "$work" || exit 1
src="$(ls -d "$work"/sqlite-autoconf-*)"
mkdir -p "$(dirname "$out")"
cc -O1 -DSQLITE_ENABLE_DBPAGE_VTAB -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS5 \
  -DSQLITE_THREADSAFE=0 "$src/shell.c" "$src/sqlite3.c" -lm -o "$out" 2>/dev/null || exit 1
echo "$out"
