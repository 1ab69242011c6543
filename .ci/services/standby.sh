#!/usr/bin/env bash
# A streaming-replication standby of the PostgreSQL 15 primary (postgres.sh, 127.0.0.1:5432),
# for the read-replica tests (SqlStore read_url=).   Usage: standby.sh start|stop|env
#
# A second cluster made with `pg_basebackup -R` (it writes standby.signal and primary_conninfo)
# into $TK_CI_DIR/standby-$PORT, run by the postgres user on 127.0.0.1:$TK_STANDBY_PORT (5433),
# hot_standby on. It streams through a physical replication slot, so the primary keeps the WAL
# the standby still needs; `stop` drops the slot again, and `start` drops a stale one of the
# same name left by a run that never stopped.
#
# What it changes on the primary (idempotent; nothing else): a role threadkeep_replicator
# (LOGIN REPLICATION), EXECUTE on pg_wal_replay_pause()/pg_wal_replay_resume() for the role
# threadkeep (they act on a standby only; the lag tests pause replay), a `host replication threadkeep_replicator 127.0.0.1/32 scram-sha-256`
# line in its pg_hba.conf when no existing line already admits replication from 127.0.0.1
# (Debian's default one does), and the slot. The primary is never restarted (a reload at
# most), so other users of it are not disturbed.
set -euo pipefail
TK_SERVICE=standby
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION=15 PRIMARY_PORT=5432
PORT=${TK_STANDBY_PORT:-5433}
BIN=/usr/lib/postgresql/$VERSION/bin
DATA=$TK_CI_DIR/standby-$PORT
LOG=$TK_CI_DIR/standby-$PORT.log
SLOT=threadkeep_standby_$PORT
ROLE=threadkeep_replicator
PASSWORD=threadkeep_replicator
HBA=/etc/postgresql/$VERSION/main/pg_hba.conf

as_postgres() { runuser -u postgres -- "$@"; }
primary_sql() { as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -p $PRIMARY_PORT -d postgres "$@"; }
running() { [[ -f $DATA/postmaster.pid ]] && as_postgres "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

ensure_primary() {
  pg_isready -q -h 127.0.0.1 -p $PRIMARY_PORT || tk_die "the primary is not running on 127.0.0.1:$PRIMARY_PORT (start postgres.sh first)"
  primary_sql >/dev/null <<SQL || tk_die "creating the replication role $ROLE on the primary failed"
SELECT 'CREATE ROLE $ROLE' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') \gexec
ALTER ROLE $ROLE WITH LOGIN REPLICATION PASSWORD '$PASSWORD';
SQL
  # Function privileges are per database: the tests connect to the database threadkeep.
  primary_sql -d threadkeep -c 'GRANT EXECUTE ON FUNCTION pg_wal_replay_pause(), pg_wal_replay_resume() TO threadkeep' \
    >/dev/null || tk_die "granting the replay functions to threadkeep failed"
  if ! grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]+(all|'$ROLE')[[:space:]]+127\.0\.0\.1/32' "$HBA"; then
    tk_say "adding a replication line for $ROLE to $HBA and reloading the primary"
    echo "host    replication     $ROLE     127.0.0.1/32    scram-sha-256  # threadkeep standby.sh" >>"$HBA"
    primary_sql -c 'SELECT pg_reload_conf()' >/dev/null
  fi
}

# The slot of a previous run that never stopped: drop it if nothing streams from it.
drop_slot() {
  primary_sql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                   WHERE slot_name = '$SLOT' AND NOT active" >/dev/null || true
}

make_standby() {
  tk_say "pg_basebackup -R from 127.0.0.1:$PRIMARY_PORT into $DATA"
  rm -rf "$DATA"
  mkdir -p "$DATA" && chown postgres:postgres "$DATA" && chmod 700 "$DATA"
  drop_slot
  local pgpass=$TK_CI_DIR/standby-$PORT.pgpass
  echo "127.0.0.1:$PRIMARY_PORT:*:$ROLE:$PASSWORD" >"$pgpass"
  chown postgres:postgres "$pgpass" && chmod 600 "$pgpass"
  as_postgres env PGPASSFILE="$pgpass" "$BIN/pg_basebackup" -h 127.0.0.1 \
    -p $PRIMARY_PORT -U $ROLE -D "$DATA" -R -X stream -C -S "$SLOT" -c fast \
    >"$LOG" 2>&1 || tk_die "pg_basebackup failed" "$LOG"
  # Debian keeps the primary's postgresql.conf and pg_hba.conf in /etc: the copy has neither.
  # primary_conninfo (written by -R into postgresql.auto.conf) carries the password.
  as_postgres tee "$DATA/postgresql.conf" >/dev/null <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
hot_standby = on
hot_standby_feedback = on
max_connections = 100
shared_buffers = 64MB
primary_slot_name = '$SLOT'
CONF
  as_postgres tee "$DATA/pg_hba.conf" >/dev/null <<HBA_CONF
local all all peer
host  all all 127.0.0.1/32 scram-sha-256
HBA_CONF
}

do_start() {
  ensure_primary
  if running; then
    tk_say "already running"
  else
    tk_port_open "$PORT" && tk_die "port $PORT is already in use by another process"
    make_standby
    touch "$LOG" && chown postgres:postgres "$LOG"
    as_postgres "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null \
      || tk_die "pg_ctl start of the standby failed" "$LOG"
  fi
  local deadline=$((SECONDS + 60))
  until [[ $(as_postgres psql -X -At -h "$DATA" -p "$PORT" -d postgres -c \
    "SELECT pg_is_in_recovery() AND pg_last_wal_receive_lsn() IS NOT NULL" 2>/dev/null) == t ]]; do
    ((SECONDS < deadline)) || tk_die "the standby did not start streaming within 60s" "$LOG"
    sleep 0.2
  done
  PGPASSWORD=threadkeep psql -X -q -h 127.0.0.1 -p "$PORT" -U threadkeep -d threadkeep -c 'SELECT 1' >/dev/null \
    || tk_die "cannot log in as threadkeep over TCP on 127.0.0.1:$PORT" "$LOG"
  tk_say "streaming from 127.0.0.1:$PRIMARY_PORT; read-only on 127.0.0.1:$PORT"
}

do_stop() {
  if running; then
    as_postgres "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null || tk_die "pg_ctl stop failed" "$LOG"
    tk_say "stopped"
  else
    tk_say "not running"
  fi
  if pg_isready -q -h 127.0.0.1 -p $PRIMARY_PORT; then drop_slot; fi
  rm -rf "$DATA"
}

do_env() {
  echo "export THREADKEEP_TEST_POSTGRES_STANDBY_URL=postgresql+asyncpg://threadkeep:threadkeep@127.0.0.1:$PORT/threadkeep"
}

tk_main "$@"
