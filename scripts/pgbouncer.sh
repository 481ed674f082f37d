# Sourced after scripts/pgtmp.sh: starts a throwaway PgBouncer in front of the throwaway PostgreSQL
# server, in transaction mode with 4 server connections per database (the way production poolers
# run), on loopback and a free random port. Every database name is passed through to the server.
# Exports PGB_TMP_PORT and PGB_TMP_DSN (the pooled conninfo of the test database) and defines
# pgb_tmp_stop. Fails (returns non-zero) when it cannot start.
pgb_tmp_start() {
  command -v pgbouncer >/dev/null || { echo "pgbouncer.sh: pgbouncer not found (apt-get install pgbouncer)" >&2; return 1; }
  [ -n "${PG_TMP_DIR:-}" ] || { echo "pgbouncer.sh: start the PostgreSQL server first (pgtmp.sh)" >&2; return 1; }
  PGB_TMP_DIR="$PG_TMP_DIR/pgbouncer"
  mkdir -p "$PGB_TMP_DIR"
  echo '"postgres" ""' >"$PGB_TMP_DIR/users.txt"
  local try port
  for try in 1 2 3 4 5 6 7 8 9 10; do
    port=$(( 20000 + RANDOM % 40000 ))
    cat >"$PGB_TMP_DIR/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$PGPORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $PGB_TMP_DIR/users.txt
pool_mode = transaction
default_pool_size = 16
max_client_conn = 1000
max_db_connections = 0
server_reset_query =
logfile = $PGB_TMP_DIR/pgbouncer.log
pidfile = $PGB_TMP_DIR/pgbouncer.pid
EOF
    [ "$(id -u)" = 0 ] && chown -R postgres "$PGB_TMP_DIR"
    if "${PG_TMP_AS[@]}" pgbouncer -d "$PGB_TMP_DIR/pgbouncer.ini" >>"$PGB_TMP_DIR/start.log" 2>&1; then
      local i
      for i in $(seq 1 50); do
        if "$PG_TMP_BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d "$PGDATABASE" -Atc 'SELECT 1' >/dev/null 2>&1; then
          export PGB_TMP_PORT="$port"
          export PGB_TMP_DSN="host=127.0.0.1 port=$port user=postgres dbname=$PGDATABASE"
          return 0
        fi
        sleep 0.1
      done
      pgb_tmp_stop
    fi
  done
  echo "pgbouncer.sh: PgBouncer did not start; its log:" >&2
  cat "$PGB_TMP_DIR/pgbouncer.log" "$PGB_TMP_DIR/start.log" >&2 2>/dev/null || true
  return 1
}

pgb_tmp_stop() {
  if [ -n "${PGB_TMP_DIR:-}" ] && [ -f "$PGB_TMP_DIR/pgbouncer.pid" ]; then
    kill "$(cat "$PGB_TMP_DIR/pgbouncer.pid")" 2>/dev/null || true
    rm -f "$PGB_TMP_DIR/pgbouncer.pid"
  fi
}
