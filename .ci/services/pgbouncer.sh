#!/usr/bin/env bash
# PgBouncer in transaction pooling mode in front of the PostgreSQL primary (postgres.sh),
# on 127.0.0.1:$TK_PGBOUNCER_PORT (6432), for the pooler tests.   Usage: pgbouncer.sh start|stop|env
#
# Debian's `pgbouncer` package (apt-get installed when missing; its own service is left alone),
# run as the postgres user (PgBouncer refuses root) with its config, auth file, log and pid
# under $TK_CI_DIR/pgbouncer-$PORT. `pool_mode = transaction`: a server connection is lent
# for one transaction at a time, so session state (prepared statements, SET, search_path)
# does not survive between transactions. Every database name is passed through (`* =`) to
# the primary, so tests can make a database of their own. The one change on the primary
# (idempotent): the role threadkeep may create databases (ALTER ROLE threadkeep CREATEDB), for
# the pooled contract suite's database (session state such as search_path does not survive a
# transaction pooler, so those tests cannot use per-test schemas).
set -euo pipefail
TK_SERVICE=pgbouncer
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PRIMARY_PORT=5432
PORT=${TK_PGBOUNCER_PORT:-6432}
DIR=$TK_CI_DIR/pgbouncer-$PORT
PIDFILE=$DIR/pgbouncer.pid
LOG=$DIR/pgbouncer.log

ensure_installed() {
  command -v pgbouncer >/dev/null && return 0
  tk_say "installing pgbouncer with apt-get"
  local log=$TK_CI_DIR/pgbouncer-apt.log
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer; } \
    >"$log" 2>&1 || tk_die "apt-get install pgbouncer failed" "$log"
}

write_config() {
  mkdir -p "$DIR"
  # The plain password lets PgBouncer answer the client's SCRAM login and log in to the
  # server with SCRAM itself.
  echo '"threadkeep" "threadkeep"' >"$DIR/userlist.txt"
  cat >"$DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$PRIMARY_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $DIR/userlist.txt
pool_mode = transaction
default_pool_size = 8
max_client_conn = 400
max_db_connections = 40
server_idle_timeout = 10
logfile = $LOG
pidfile = $PIDFILE
admin_users =
INI
  chown -R postgres:postgres "$DIR"
  chmod 600 "$DIR/userlist.txt"
}

do_start() {
  ensure_installed
  if tk_alive "$PIDFILE"; then
    tk_say "already running"
  else
    pg_isready -q -h 127.0.0.1 -p $PRIMARY_PORT || tk_die "the primary is not running on 127.0.0.1:$PRIMARY_PORT (start postgres.sh first)"
    tk_port_open "$PORT" && tk_die "port $PORT is already in use by another process"
    runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p $PRIMARY_PORT -d postgres \
      -c 'ALTER ROLE threadkeep CREATEDB' >/dev/null || tk_die "ALTER ROLE threadkeep CREATEDB failed"
    write_config
    runuser -u postgres -- pgbouncer -d -q "$DIR/pgbouncer.ini" || tk_die "pgbouncer did not start" "$LOG"
  fi
  local deadline=$((SECONDS + 30))
  until PGPASSWORD=threadkeep psql -X -q -h 127.0.0.1 -p "$PORT" -U threadkeep -d threadkeep -c 'SELECT 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || tk_die "PgBouncer did not pass a query to the primary within 30s" "$LOG"
    sleep 0.2
  done
  tk_say "ready on 127.0.0.1:$PORT (pool_mode = transaction) in front of 127.0.0.1:$PRIMARY_PORT"
}

do_stop() {
  tk_stop "$PIDFILE" 10
}

do_env() {
  echo "export THREADKEEP_TEST_PGBOUNCER_URL=postgresql+asyncpg://threadkeep:threadkeep@127.0.0.1:$PORT/threadkeep"
}

tk_main "$@"
