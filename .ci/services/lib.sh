# Shared helpers for .ci/services/*.sh (sourced, not run).
# Logs, pid files, virtualenvs and data live under $TK_CI_DIR; everything binds 127.0.0.1.

TK_CI_DIR=${TK_CI_DIR:-/tmp/threadkeep-ci}
export TK_CI_DIR
mkdir -p "$TK_CI_DIR"

tk_say() { echo "[$TK_SERVICE] $*" >&2; }

# tk_die MESSAGE [LOGFILE]: one clear ERROR line, then the tail of LOGFILE if given; exit 1.
tk_die() {
  echo "ERROR [$TK_SERVICE]: $1" >&2
  if [[ -n ${2:-} && -s $2 ]]; then
    echo "---- last 25 lines of $2 ----" >&2
    tail -n 25 "$2" >&2
    echo "----" >&2
  fi
  exit 1
}

# tk_port_open PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
tk_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# tk_alive PIDFILE: true if the process recorded in PIDFILE is running (a zombie counts as gone).
tk_alive() {
  local pid state
  pid=$(cat "$1" 2>/dev/null) && [[ -n $pid ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) && [[ -n $state && $state != [ZX] ]]
}

# tk_venv DIR REQUIREMENT...: make DIR a virtualenv holding exactly these pinned requirements.
# Reuses DIR when it was built from the same list; rebuilds it otherwise.
tk_venv() {
  local dir=$1; shift
  local stamp="$dir/.threadkeep-requirements" log="$dir.install.log"
  if [[ -x $dir/bin/python && "$(cat "$stamp" 2>/dev/null)" == "$*" ]]; then return 0; fi
  tk_say "creating virtualenv $dir with $*"
  rm -rf "$dir"
  python3 -m venv "$dir" >"$log" 2>&1 || tk_die "python3 -m venv $dir failed" "$log"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >>"$log" 2>&1 \
    || tk_die "pip install $* failed" "$log"
  echo "$*" >"$stamp"
}

# tk_spawn PIDFILE LOGFILE CMD...: run CMD detached in its own session, stdout+stderr to LOGFILE.
tk_spawn() {
  local pidfile=$1 log=$2; shift 2
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >"$log" 2>&1 &
  local i
  for i in $(seq 50); do [[ -s $pidfile ]] && return 0; sleep 0.1; done
  tk_die "could not launch $1" "$log"
}

# tk_wait_until TIMEOUT PIDFILE LOGFILE WHAT CMD...: poll CMD until it succeeds.
# Fails fast if the process in PIDFILE dies, and after TIMEOUT seconds.
tk_wait_until() {
  local timeout=$1 pidfile=$2 log=$3 what=$4; shift 4
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    tk_alive "$pidfile" || tk_die "server exited before $what" "$log"
    ((SECONDS < deadline)) || tk_die "timed out after ${timeout}s waiting for $what" "$log"
    sleep 0.2
  done
}

# tk_stop PIDFILE [TIMEOUT]: SIGTERM the process, SIGKILL it after TIMEOUT seconds (default 30).
tk_stop() {
  local pidfile=$1 timeout=${2:-30}
  if ! tk_alive "$pidfile"; then
    tk_say "not running"
    rm -f "$pidfile"
    return 0
  fi
  local pid i
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    tk_alive "$pidfile" || break
    sleep 0.1
  done
  if tk_alive "$pidfile"; then
    tk_say "pid $pid ignored SIGTERM for ${timeout}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  tk_say "stopped"
}

# tk_main "$@": dispatch start|stop|env to the calling script's do_start/do_stop/do_env.
tk_main() {
  case ${1:-} in
    start) do_start ;;
    stop) do_stop ;;
    env) do_env ;;
    *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
  esac
}
