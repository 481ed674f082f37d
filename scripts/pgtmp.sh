# Sourced: starts a throwaway PostgreSQL server (temporary data directory, unix socket in it plus
# loopback TCP on a free random port) and defines pg_tmp_stop. Exports PGHOST, PGPORT, PGUSER,
# PGDATABASE and PG_TMP_DSN. Fails (returns non-zero) when the server cannot start.
pg_tmp_start() {
  local bin
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -x "$bin/initdb" ] || { echo "pgtmp: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; return 1; }
  PG_TMP_BIN="$bin"
  PG_TMP_DIR="$(mktemp -d /tmp/rcpg.XXXXXX)"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_TMP_DIR"
    as=(runuser -u postgres --)
  fi
  PG_TMP_AS=("${as[@]}")
  "${as[@]}" "$bin/initdb" -D "$PG_TMP_DIR/data" -U postgres --auth=trust --no-sync -E UTF8 \
      >"$PG_TMP_DIR/initdb.log" 2>&1 || { cat "$PG_TMP_DIR/initdb.log" >&2; return 1; }
  local try port
  for try in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + RANDOM % 40000 ))
    if "${as[@]}" "$bin/pg_ctl" -D "$PG_TMP_DIR/data" -l "$PG_TMP_DIR/server.log" -w -t 30 \
        -o "-p $port -k $PG_TMP_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 ${PG_TMP_OPTS:-}" \
        start >/dev/null 2>&1; then
      export PGHOST="$PG_TMP_DIR" PGPORT="$port" PGUSER=postgres PGDATABASE=rewardctl_test
      "$bin/createdb" -h "$PGHOST" -p "$PGPORT" -U postgres rewardctl_test || return 1
      export PG_TMP_DSN="host=$PGHOST port=$PGPORT user=postgres dbname=rewardctl_test"
      return 0
    fi
  done
  echo "pgtmp: PostgreSQL did not start; server log:" >&2
  cat "$PG_TMP_DIR/server.log" >&2 || true
  return 1
}

pg_tmp_stop() {
  if [ -n "${PG_TMP_DIR:-}" ] && [ -d "$PG_TMP_DIR/data" ]; then
    "${PG_TMP_AS[@]}" "$PG_TMP_BIN/pg_ctl" -D "$PG_TMP_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  [ -n "${PG_TMP_DIR:-}" ] && rm -rf "$PG_TMP_DIR"
  PG_TMP_DIR=
}
