#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops the throwaway Redis server coord's tests run against: a
# plain process on 127.0.0.1, its state (append-only file) inside DIR, with
# the engine's durable settings: appendonly yes, appendfsync always (every
# acknowledged write is on disk before the reply). Installs redis-server when
# it is missing and the user is root (the packaged service on 6379 is never
# started). ctest runs `start` and `stop` as the fixture of every test that
# needs the server.
#
#   tests/redis/redis.sh install            # the server's packages when missing (as root), nothing started
#   tests/redis/redis.sh start DIR PORT [durable|volatile|secure|secure-volatile]
#                                     # fresh server, empty data set; volatile: no
#                                     # append-only file (the benchmarks: coord's cost,
#                                     # not the disk's; durable is the default); secure:
#                                     # durable, TLS only (no plain port: tls-port PORT on
#                                     # 127.0.0.1 and 127.0.0.2, client certificates
#                                     # required, throwaway certificates in DIR/tls made
#                                     # by tests/tls.sh, the server's for 127.0.0.1 and
#                                     # localhost only), with ACL users only (the default
#                                     # user off): coord (every key and command) and reader
#                                     # (read commands only), their passwords in
#                                     # DIR/coord.password and DIR/reader.password (mode 600);
#                                     # secure-volatile: the same without the append-only file
#   tests/redis/redis.sh stop DIR           # clean shutdown, removes DIR
#   tests/redis/redis.sh restart DIR PORT   # clean shutdown and start on the same data
#   tests/redis/redis.sh kill DIR PORT      # SIGKILL, then start on what reached the disk
#   tests/redis/redis.sh lose DIR PORT      # SIGKILL, the data removed, start empty: a
#                                     # restart without persistence, or a failover to
#                                     # a replica that had none of the writes
#   tests/redis/redis.sh copy DIR           # a copy of the data directory (the append-only
#                                     # file's manifest, its RDB-format base and its
#                                     # increments) as it is on disk now: every
#                                     # acknowledged write is there (appendfsync always)
#   tests/redis/redis.sh rollback DIR PORT  # SIGKILL, the data directory replaced by the
#                                     # copy, start on it: an older backup put back
#   tests/redis/redis.sh pause DIR          # SIGSTOP the server (a long pause, a frozen VM)
#   tests/redis/redis.sh resume DIR         # SIGCONT it
#   tests/redis/redis.sh conninfo DIR PORT  # the server's URL: redis://127.0.0.1:PORT
#                                     # (rediss:// for a secure one)
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt_install.sh"
# shellcheck source=tests/process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../process.sh"
# shellcheck source=tests/tls.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tls.sh"

cmd="${1:-}"
dir="${2:-}"
port="${3:-16379}"
mode="${4:-durable}"
case "$mode" in durable|volatile|secure|secure-volatile) ;; *) echo "mode must be durable, volatile, secure or secure-volatile, got $mode" >&2; exit 2 ;; esac
[ "$cmd" = install ] || { [ -n "$cmd" ] && [ -n "$dir" ]; } || { echo "usage: $0 install | start|stop|restart|kill|lose|copy|rollback|pause|resume|conninfo DIR [PORT]" >&2; exit 2; }
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

log() { printf '[redis.sh] %s\n' "$*" >&2; }

install_server() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then
    log "redis-server is not installed and this user cannot install it: apt-get install redis-server redis-tools"
    exit 1
  fi
  log "installing redis-server"
  apt_install redis-server redis-tools
  return 0
}
[ "$cmd" = install ] && { install_server; exit 0; }

pid_of() { [ -f "$dir/pid" ] && cat "$dir/pid"; }
ping() {
  if [ -f "$dir/coord.password" ]; then
    [ "$(REDISCLI_AUTH=$(cat "$dir/coord.password") redis-cli --no-auth-warning --user coord -h 127.0.0.1 -p "$port" \
      --tls --cacert "$dir/tls/ca.crt" --cert "$dir/tls/client.crt" --key "$dir/tls/client.key" ping 2>/dev/null)" = PONG ]
  else
    [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]
  fi
}

server_start() {
  mkdir -p "$dir/data"
  # The mode is kept with the state, so that restart and kill keep it.
  [ -f "$dir/mode" ] && mode=$(cat "$dir/mode")
  echo "$mode" > "$dir/mode"
  local persistence=(--appendonly yes --appendfsync always)
  case "$mode" in *volatile) persistence=(--appendonly no) ;; esac
  local config=() listen=(--port "$port")
  if [ "${mode%-volatile}" = secure ]; then
    [ -f "$dir/tls/ca.crt" ] || make_test_certs "$dir/tls"
    listen=(--port 0 --tls-port "$port" --tls-cert-file "$dir/tls/server.crt" --tls-key-file "$dir/tls/server.key"
      --tls-ca-cert-file "$dir/tls/ca.crt" --tls-auth-clients yes)
    # The users in a config file of mode 600 (their passwords on no command line).
    if [ ! -f "$dir/coord.password" ]; then
      (umask 077; openssl rand -hex 16 > "$dir/coord.password"; openssl rand -hex 16 > "$dir/reader.password")
    fi
    (umask 077; {
      echo "user default off"
      echo "user coord on >$(cat "$dir/coord.password") ~* &* +@all"
      echo "user reader on >$(cat "$dir/reader.password") ~* &* -@all +@read +ping +hello +auth"
    } > "$dir/users.conf")
    config=("$dir/users.conf")
  fi
  local bind=(127.0.0.1)
  [ "${mode%-volatile}" = secure ] && bind=(127.0.0.1 127.0.0.2)  # 127.0.0.2: a name the certificate is not for
  setsid redis-server "${config[@]}" --bind "${bind[@]}" "${listen[@]}" --protected-mode yes --daemonize no \
    --dir "$dir/data" --logfile "$dir/log" --save '' "${persistence[@]}" \
    </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/pid"
  local i
  for i in $(seq 1 600); do
    ping && return 0
    if ! alive "$(pid_of)"; then log "server died during startup; log tail:"; tail -n 30 "$dir/log" >&2 || true; exit 1; fi
    sleep 0.05
  done
  log "server not ready after 30 s; log tail:"; tail -n 30 "$dir/log" >&2 || true
  exit 1
}

wait_gone() {
  local pid=$1 i
  for i in $(seq 1 600); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
}

server_stop() {  # clean: the append-only file is complete
  local pid; pid=$(pid_of) || return 0
  alive "$pid" || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone "$pid"
}

server_kill() {
  local pid; pid=$(pid_of) || return 0
  alive "$pid" || return 0
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid"
}

case "$cmd" in
  start)
    install_server
    server_stop
    # A server of an earlier run on this port (its DIR gone) is stopped too.
    redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$dir"
    mkdir -p "$dir"
    server_start
    log "ready on 127.0.0.1:$port (state in $dir, $mode)"
    ;;
  stop)
    server_stop
    rm -rf "$dir"
    ;;
  restart)
    server_stop
    server_start
    ;;
  kill)
    server_kill
    server_start
    ;;
  lose)
    server_kill
    rm -rf "$dir/data"
    server_start
    ;;
  copy)
    rm -rf "$dir/copy"
    cp -a "$dir/data" "$dir/copy"
    ;;
  rollback)
    [ -d "$dir/copy" ] || { log "no copy in $dir: run copy first"; exit 2; }
    server_kill
    rm -rf "$dir/data"
    cp -a "$dir/copy" "$dir/data"
    server_start
    ;;
  pause)
    kill -STOP "$(pid_of)"
    ;;
  resume)
    kill -CONT "$(pid_of)"
    ;;
  conninfo)
    if [ -f "$dir/coord.password" ]; then echo "rediss://127.0.0.1:$port"; else echo "redis://127.0.0.1:$port"; fi
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
