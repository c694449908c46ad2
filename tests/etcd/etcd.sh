#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops the throwaway etcd servers coord's tests run against: plain
# processes on 127.0.0.1, state inside DIR. Installs etcd-server when it is
# missing and the user is root (the packaged service is never started). ctest
# runs `start` and `stop` as the fixtures of the tests that need them.
#
#   tests/etcd/etcd.sh install             # the server's packages when missing (as root), nothing started
#   tests/etcd/etcd.sh start DIR PORT [N] [durable]
#                                      # a fresh cluster of N members (1 or 3, default 1):
#                                      # member i serves clients on PORT+2i, peers on PORT+2i+1;
#                                      # durable: etcd's own fsync kept (the fault suite)
#   tests/etcd/etcd.sh stop DIR             # every member stopped, DIR removed
#   tests/etcd/etcd.sh kill DIR I           # SIGKILL member I (0-based)
#   tests/etcd/etcd.sh restart DIR I        # start member I again on its data
#   tests/etcd/etcd.sh pause DIR I          # SIGSTOP member I
#   tests/etcd/etcd.sh resume DIR I         # SIGCONT member I
#   tests/etcd/etcd.sh leader DIR           # the index of the member that is leader now
#   tests/etcd/etcd.sh snapshot DIR FILE    # etcdctl snapshot save FILE (from member 0)
#   tests/etcd/etcd.sh restore DIR FILE     # a one-member cluster stopped, its data replaced by
#                                      # etcdctl snapshot restore FILE, started on the same endpoint
#   tests/etcd/etcd.sh conninfo DIR PORT [N]  # etcd://127.0.0.1:PORT[,...]
#
# No fsync (--unsafe-no-fsync) unless started durable: a SIGKILL loses
# nothing the OS holds; the tests kill processes, not machines.
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt_install.sh"
# shellcheck source=tests/process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../process.sh"

cmd="${1:-}"
dir="${2:-}"
[ "$cmd" = install ] || { [ -n "$cmd" ] && [ -n "$dir" ]; } || { echo "usage: $0 install | start|stop|kill|restart|pause|resume|leader|snapshot|restore|conninfo DIR ..." >&2; exit 2; }
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

log() { printf '[etcd.sh] %s\n' "$*" >&2; }

install_server() {
  command -v etcd >/dev/null && command -v etcdctl >/dev/null && command -v curl >/dev/null && return 0
  if [ "$(id -u)" != 0 ]; then
    log "etcd is not installed and this user cannot install it: apt-get install etcd-server etcd-client curl"
    exit 1
  fi
  log "installing etcd-server, etcd-client"
  apt_install etcd-server etcd-client curl
  return 0
}
[ "$cmd" = install ] && { install_server; exit 0; }

port_of() { echo $(( $(cat "$dir/port") + 2 * $1 )); }
members() { cat "$dir/members"; }
cluster_spec() {
  local n=$1 base=$2 i spec=""
  for i in $(seq 0 $((n - 1))); do spec="${spec:+$spec,}m$i=http://127.0.0.1:$((base + 2 * i + 1))"; done
  echo "$spec"
}
healthy() { curl -fsS -m 2 "http://127.0.0.1:$(port_of "$1")/health" 2>/dev/null | grep -q '"health":"true"'; }

member_start() {  # member_start I STATE(new|existing)
  local i=$1 state=$2 base; base=$(cat "$dir/port")
  local c=$((base + 2 * i)) p=$((base + 2 * i + 1)) m="$dir/m$i"
  mkdir -p "$m"
  case "$(uname -m)" in aarch64) export ETCD_UNSUPPORTED_ARCH=arm64 ;; esac
  setsid etcd --name "m$i" --data-dir "$m/data" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "$(cluster_spec "$(members)" "$base")" --initial-cluster-state "$state" \
    --initial-cluster-token "coord-$base" $( [ "$(cat "$dir/mode" 2>/dev/null)" = durable ] || echo --unsafe-no-fsync) \
    </dev/null >>"$m/log" 2>&1 &
  echo $! > "$m/pid"
}
wait_healthy() {
  local i t
  for t in $(seq 1 600); do
    local ok=1
    for i in "$@"; do healthy "$i" || ok=0; done
    [ "$ok" = 1 ] && return 0
    for i in "$@"; do alive "$(cat "$dir/m$i/pid")" || { log "member $i died; log tail:"; tail -n 20 "$dir/m$i/log" >&2; exit 1; }; done
    sleep 0.1
  done
  log "members $* not healthy after 60 s"; exit 1
}
member_stop() {
  local pidf="$dir/m$1/pid" pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  alive "$pid" || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  local t; for t in $(seq 1 300); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
}

case "$cmd" in
  start)
    base="${3:?PORT}"; n="${4:-1}"
    case "$n" in 1|3) ;; *) echo "N must be 1 or 3" >&2; exit 2 ;; esac
    install_server
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do member_stop "$i" KILL; done; fi
    rm -rf "$dir"; mkdir -p "$dir"
    echo "$base" > "$dir/port"; echo "$n" > "$dir/members"; echo "${5:-fast}" > "$dir/mode"
    for i in $(seq 0 $((n - 1))); do member_start "$i" new; done
    wait_healthy $(seq 0 $((n - 1)))
    log "ready: $n member(s) from 127.0.0.1:$base (state in $dir)"
    ;;
  stop)
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do member_stop "$i"; done; fi
    rm -rf "$dir"
    ;;
  kill) member_stop "${3:?I}" KILL ;;
  restart) member_start "${3:?I}" existing; wait_healthy "$3" ;;
  pause) kill -STOP "$(cat "$dir/m${3:?I}/pid")" ;;
  resume) kill -CONT "$(cat "$dir/m${3:?I}/pid")" ;;
  leader)
    for t in $(seq 1 300); do
      for i in $(seq 0 $(( $(members) - 1 ))); do
        s=$(curl -fsS -m 1 -X POST -d '{}' "http://127.0.0.1:$(port_of "$i")/v3/maintenance/status" 2>/dev/null) || continue
        me=$(echo "$s" | sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p'); lead=$(echo "$s" | sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p')
        [ -n "$me" ] && [ "$me" = "$lead" ] && { echo "$i"; exit 0; }
      done
      sleep 0.1
    done
    log "no leader after 30 s"; exit 1
    ;;
  snapshot)
    ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$(port_of 0)" snapshot save "${3:?FILE}" >/dev/null
    ;;
  restore)
    [ "$(members)" = 1 ] || { echo "restore: one member only" >&2; exit 2; }
    base=$(cat "$dir/port")
    member_stop 0
    rm -rf "$dir/m0/data"
    ETCDCTL_API=3 etcdctl snapshot restore "${3:?FILE}" --data-dir "$dir/m0/data" --name m0 \
      --initial-cluster "$(cluster_spec 1 "$base")" --initial-cluster-token "coord-$base" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((base + 1))" >>"$dir/m0/log" 2>&1
    member_start 0 existing
    wait_healthy 0
    ;;
  conninfo)
    base="${3:?PORT}"; n="${4:-1}"; spec=""
    for i in $(seq 0 $((n - 1))); do spec="${spec:+$spec,}127.0.0.1:$((base + 2 * i))"; done
    echo "etcd://$spec"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
