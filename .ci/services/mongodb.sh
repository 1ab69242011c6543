#!/usr/bin/env bash
# MongoDB wire protocol for tests: SecantusDB 0.7.0b3 (a one-node replica set, in memory)
# on 127.0.0.1:27017, from its own virtualenv.   Usage: mongodb.sh start|stop|env
set -euo pipefail
TK_SERVICE=mongodb
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT=27017
VENV=$TK_CI_DIR/secantus-venv
STATE=$TK_CI_DIR/mongodb
PIDFILE=$STATE/secantusd.pid
LOG=$STATE/secantusd.log
URL="mongodb://127.0.0.1:$PORT/?directConnection=true"

ping() {  # secantusdb pulls in pymongo, so the venv has a client
  "$VENV/bin/python" -c 'import sys, pymongo
pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=1000).admin.command("ping")' "$URL"
}

do_start() {
  if tk_alive "$PIDFILE"; then
    tk_wait_until 60 "$PIDFILE" "$LOG" "a ping on 127.0.0.1:$PORT" ping
    tk_say "already running"
    return 0
  fi
  tk_port_open $PORT && tk_die "port $PORT is already in use by another process"
  tk_venv "$VENV" secantusdb==0.7.0b3
  rm -rf "$STATE" && mkdir -p "$STATE/tmp"
  : >"$STATE/secantusd.toml"  # empty config: --config stops it reading ./, ~/.secantus or /etc/secantus
  # :memory: keeps WiredTiger in a temp dir under $TMPDIR, removed on shutdown.
  # A bigger cache and a short oplog: with :memory: storage, data plus oplog must fit the cache,
  # and the contract suite writes far more than a real mongod (which spills to disk) would hold.
  (cd "$STATE" && export TMPDIR=$STATE/tmp && tk_spawn "$PIDFILE" "$LOG" "$VENV/bin/secantusd-py" \
    --config "$STATE/secantusd.toml" --host 127.0.0.1 --port $PORT --storage-path :memory: --log-level WARNING \
    --cache-size 2G --oplog-retention-seconds 300 --oplog-max-entries 200000)
  tk_wait_until 60 "$PIDFILE" "$LOG" "a ping on 127.0.0.1:$PORT" ping
  tk_say "ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"
}

do_stop() { tk_stop "$PIDFILE" 30; }

do_env() { echo "export THREADKEEP_TEST_MONGODB_URL='$URL'"; }

tk_main "$@"
