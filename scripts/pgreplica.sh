# Sourced after scripts/pgtmp.sh: starts a throwaway hot standby of the throwaway PostgreSQL server -
# a copy made with pg_basebackup, streaming the primary's WAL - on loopback and a free random port,
# with its own data directory inside the primary's. Read-only work (`[db] read_url`) is tested
# against it while claims continue on the primary. Exports PGR_TMP_DSN (the standby's conninfo of
# the test database) and defines pgr_tmp_stop. Fails (returns non-zero) when it cannot start.
pgr_tmp_start() {
  [ -n "${PG_TMP_DIR:-}" ] || { echo "pgreplica.sh: start the PostgreSQL server first (pgtmp.sh)" >&2; return 1; }
  PGR_TMP_DIR="$PG_TMP_DIR/replica"
  mkdir -p "$PGR_TMP_DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$PGR_TMP_DIR"
  # -R: standby.signal and primary_conninfo; -X stream: the WAL of the copy itself, over a second connection
  "${PG_TMP_AS[@]}" "$PG_TMP_BIN/pg_basebackup" -h "$PG_TMP_DIR" -p "$PGPORT" -U postgres -D "$PGR_TMP_DIR/data" \
      -R -X stream -c fast --no-sync >"$PGR_TMP_DIR/basebackup.log" 2>&1 \
    || { echo "pgreplica.sh: pg_basebackup failed:" >&2; cat "$PGR_TMP_DIR/basebackup.log" >&2; return 1; }
  local try port
  for try in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + RANDOM % 40000 ))
    # (a standby needs max_connections at least the primary's)
    if "${PG_TMP_AS[@]}" "$PG_TMP_BIN/pg_ctl" -D "$PGR_TMP_DIR/data" -l "$PGR_TMP_DIR/server.log" -w -t 60 \
        -o "-p $port -k $PGR_TMP_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 -c hot_standby=on" \
        start >/dev/null 2>&1; then
      export PGR_TMP_PORT="$port"
      export PGR_TMP_DSN="host=127.0.0.1 port=$port user=postgres dbname=$PGDATABASE"
      return 0
    fi
  done
  echo "pgreplica.sh: the standby did not start; its log:" >&2
  cat "$PGR_TMP_DIR/server.log" >&2 || true
  return 1
}

pgr_tmp_stop() {
  if [ -n "${PGR_TMP_DIR:-}" ] && [ -d "$PGR_TMP_DIR/data" ]; then
    "${PG_TMP_AS[@]}" "$PG_TMP_BIN/pg_ctl" -D "$PGR_TMP_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
}
