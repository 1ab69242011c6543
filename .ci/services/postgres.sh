#!/usr/bin/env bash
# PostgreSQL 15 for tests: the Debian cluster 15/main on 127.0.0.1:5432, with role and
# databases `threadkeep` / `threadkeep_bench`.   Usage: postgres.sh start|stop|env
# The cluster's data and log stay where Debian keeps them (/var/lib/postgresql, /var/log/postgresql).
set -euo pipefail
TK_SERVICE=postgres
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION=15 CLUSTER=main PORT=5432
PG_LOG=/var/log/postgresql/postgresql-$VERSION-$CLUSTER.log

cluster_status() { pg_lsclusters -h 2>/dev/null | awk -v v=$VERSION -v c=$CLUSTER '$1 == v && $2 == c {print $3, $4}'; }

ensure_installed() {
  if ! command -v pg_ctlcluster >/dev/null || [[ ! -x /usr/lib/postgresql/$VERSION/bin/postgres ]]; then
    tk_say "installing postgresql-$VERSION with apt-get"
    local log=$TK_CI_DIR/postgres-apt.log
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-$VERSION; } \
      >"$log" 2>&1 || tk_die "apt-get install postgresql-$VERSION failed" "$log"
  fi
  if [[ -z $(cluster_status) ]]; then
    pg_createcluster $VERSION $CLUSTER -p $PORT >/dev/null || tk_die "pg_createcluster $VERSION $CLUSTER failed"
  fi
}

do_start() {
  ensure_installed
  local port status
  read -r port status <<<"$(cluster_status)"
  [[ $port == "$PORT" ]] || tk_die "cluster $VERSION/$CLUSTER is configured for port $port, not $PORT"
  if [[ $status == online ]]; then
    tk_say "already running"
  else
    tk_port_open $PORT && tk_die "port $PORT is already in use by another process"
    pg_ctlcluster $VERSION $CLUSTER start -- -o "-c listen_addresses=127.0.0.1" \
      || tk_die "pg_ctlcluster $VERSION $CLUSTER start failed" "$PG_LOG"
  fi
  local deadline=$((SECONDS + 60))
  until pg_isready -q -h 127.0.0.1 -p $PORT; do
    ((SECONDS < deadline)) || tk_die "PostgreSQL did not accept connections on 127.0.0.1:$PORT within 60s" "$PG_LOG"
    sleep 0.2
  done
  runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p $PORT -d postgres >/dev/null <<'SQL' || tk_die "creating role/databases threadkeep failed" "$PG_LOG"
SELECT 'CREATE ROLE threadkeep' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'threadkeep') \gexec
ALTER ROLE threadkeep WITH LOGIN PASSWORD 'threadkeep';
SELECT format('CREATE DATABASE %I OWNER threadkeep', d) FROM unnest(ARRAY['threadkeep', 'threadkeep_bench']) AS d
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = d) \gexec
ALTER DATABASE threadkeep OWNER TO threadkeep;
ALTER DATABASE threadkeep_bench OWNER TO threadkeep;
SQL
  PGPASSWORD=threadkeep psql -X -q -h 127.0.0.1 -p $PORT -U threadkeep -d threadkeep -c 'SELECT 1' >/dev/null \
    || tk_die "cannot log in as threadkeep over TCP on 127.0.0.1:$PORT"
  tk_say "ready on 127.0.0.1:$PORT (databases threadkeep, threadkeep_bench)"
}

do_stop() {
  if [[ $(cluster_status) == *online ]]; then
    pg_ctlcluster $VERSION $CLUSTER stop -m fast || tk_die "pg_ctlcluster $VERSION $CLUSTER stop failed" "$PG_LOG"
    tk_say "stopped"
  else
    tk_say "not running"
  fi
}

do_env() {
  echo "export THREADKEEP_TEST_POSTGRES_URL=postgresql+asyncpg://threadkeep:threadkeep@127.0.0.1:$PORT/threadkeep"
}

tk_main "$@"
