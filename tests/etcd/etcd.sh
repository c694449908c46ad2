#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts and stops the throwaway etcd servers coord's tests run against: plain
# processes on 127.0.0.1, state inside DIR. Installs etcd-server when it is
# missing and the user is root (the packaged service is never started). ctest
# runs `start` and `stop` as the fixtures of the tests that need them.
#
#   tests/etcd/etcd.sh install             # the server's packages when missing (as root), nothing started
#   tests/etcd/etcd.sh start DIR PORT [N] [durable|secure]
#                                      # a fresh cluster of N members (1 or 3, default 1):
#                                      # member i serves clients on PORT+2i, peers on PORT+2i+1;
#                                      # durable: etcd's own fsync kept (the fault suite);
#                                      # secure: clients on https only, with a client
#                                      # certificate the test CA signed (DIR/tls, made by
#                                      # tests/tls.sh), and etcd's authentication on: users
#                                      # root, coord (read and write on coord/...) and reader
#                                      # (read only), their passwords in DIR/USER.password
#                                      # (mode 600, on no command line)
#   tests/etcd/etcd.sh stop DIR             # every member stopped, DIR removed
#   tests/etcd/etcd.sh kill DIR I           # SIGKILL member I (0-based)
#   tests/etcd/etcd.sh touch-password DIR USER  # secure: USER's password set again (the same):
#                                      # etcd drops every token USER signed in with
#   tests/etcd/etcd.sh restart DIR I        # start member I again on its data
#   tests/etcd/etcd.sh pause DIR I          # SIGSTOP member I
#   tests/etcd/etcd.sh resume DIR I         # SIGCONT member I
#   tests/etcd/etcd.sh leader DIR           # the index of the member that is leader now
#   tests/etcd/etcd.sh snapshot DIR FILE    # etcdctl snapshot save FILE (from member 0)
#   tests/etcd/etcd.sh restore DIR FILE     # a one-member cluster stopped, its data replaced by
#                                      # etcdctl snapshot restore FILE, started on the same endpoint
#   tests/etcd/etcd.sh conninfo DIR PORT [N] [secure]  # etcd://127.0.0.1:PORT[,...] (etcds:// when secure)
#
# COORD_MEMBER_GID_BASE=G at start (root): member i runs with group id G+i
# (setpriv), so that iptables' owner match tells its packets from the other
# members' (on loopback every member's connections come from 127.0.0.1): the
# fault suite partitions a leader from the majority this way.
#
# No fsync (--unsafe-no-fsync) unless started durable: a SIGKILL loses
# nothing the OS holds; the tests kill processes, not machines.
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apt_install.sh"
# shellcheck source=tests/process.sh
source "$(dirname "${BASH_SOURCE[0]}")/../process.sh"
# shellcheck source=tests/tls.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tls.sh"

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
secure() { [ "$(cat "$dir/mode" 2>/dev/null)" = secure ]; }
scheme() { if secure; then echo https; else echo http; fi; }
# curl to member I's client port (with the client certificate when secure).
client_curl() {
  local i=$1; shift
  if secure; then
    curl --cacert "$dir/tls/ca.crt" --cert "$dir/tls/client.crt" --key "$dir/tls/client.key" "$@"
  else
    curl "$@"
  fi
}
healthy() { client_curl "$1" -fsS -m 2 "$(scheme)://127.0.0.1:$(port_of "$1")/health" 2>/dev/null | grep -q '"health":"true"'; }

member_start() {  # member_start I STATE(new|existing)
  local i=$1 state=$2 base; base=$(cat "$dir/port")
  local c=$((base + 2 * i)) p=$((base + 2 * i + 1)) m="$dir/m$i"
  mkdir -p "$m"
  case "$(uname -m)" in aarch64) export ETCD_UNSUPPORTED_ARCH=arm64 ;; esac
  local tls=()
  secure && tls=(--cert-file "$dir/tls/server.crt" --key-file "$dir/tls/server.key" --client-cert-auth
                 --trusted-ca-file "$dir/tls/ca.crt")
  as_member "$i"
  setsid "${member_prefix[@]}" etcd --name "m$i" --data-dir "$m/data" "${tls[@]}" \
    --listen-client-urls "$(scheme)://127.0.0.1:$c" --advertise-client-urls "$(scheme)://127.0.0.1:$c" \
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

# secure: the users and roles, then authentication on. Each request's body
# is a file of mode 600 (passwords on no command line).
auth_call() {  # auth_call PATH JSON [HEADERS-FILE]: prints etcd's answer
  local body="$dir/tls/request.json" out headers=()
  [ -n "${3:-}" ] && headers=(-H "@$3")
  (umask 077; printf '%s' "$2" > "$body")
  out=$(client_curl 0 -sS -m 10 -X POST "${headers[@]}" --data-binary "@$body" "https://127.0.0.1:$(port_of 0)/v3/auth/$1") ||
    { rm -f "$body"; log "auth $1 failed"; exit 1; }
  rm -f "$body"
  case "$out" in *'"error"'*) log "auth $1: $out"; exit 1 ;; esac
  printf '%s' "$out"
}
b64() { printf '%s' "$1" | base64 -w0; }
secure_auth() {
  local u
  for u in root coord reader; do (umask 077; openssl rand -hex 16 > "$dir/$u.password"); done
  for u in root coord reader; do
    auth_call user/add "{\"name\":\"$u\",\"password\":\"$(cat "$dir/$u.password")\"}" >/dev/null
  done
  auth_call user/grant "{\"user\":\"root\",\"role\":\"root\"}" >/dev/null
  local range="\"key\":\"$(b64 coord/)\",\"range_end\":\"$(b64 coord0)\""
  auth_call role/add '{"name":"coord_rw"}' >/dev/null
  auth_call role/grant "{\"name\":\"coord_rw\",\"perm\":{\"permType\":\"READWRITE\",$range}}" >/dev/null
  auth_call role/add '{"name":"coord_ro"}' >/dev/null
  auth_call role/grant "{\"name\":\"coord_ro\",\"perm\":{\"permType\":\"READ\",$range}}" >/dev/null
  auth_call user/grant '{"user":"coord","role":"coord_rw"}' >/dev/null
  auth_call user/grant '{"user":"reader","role":"coord_ro"}' >/dev/null
  auth_call enable '{}' >/dev/null
}
# secure: USER's password set again (the same one, as root): etcd drops
# every token USER signed in with ("invalid auth token" from then on), as
# after a password change in production.
touch_password() {
  local user="$1"
  local headers="$dir/tls/headers" token
  token=$(auth_call authenticate "{\"name\":\"root\",\"password\":\"$(cat "$dir/root.password")\"}" |
    sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
  [ -n "$token" ] || { log "touch-auth: root could not sign in"; exit 1; }
  (umask 077; printf 'Authorization: %s\n' "$token" > "$headers")
  auth_call user/changepw "{\"name\":\"$user\",\"password\":\"$(cat "$dir/$user.password")\"}" "$headers" >/dev/null
  rm -f "$headers"
}

case "$cmd" in
  start)
    base="${3:?PORT}"; n="${4:-1}"
    case "$n" in 1|3) ;; *) echo "N must be 1 or 3" >&2; exit 2 ;; esac
    install_server
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do member_stop "$i" KILL; done; fi
    rm -rf "$dir"; mkdir -p "$dir"
    echo "$base" > "$dir/port"; echo "$n" > "$dir/members"; echo "${5:-fast}" > "$dir/mode"
    echo "${COORD_MEMBER_GID_BASE:-}" > "$dir/gid-base"
    secure && make_test_certs "$dir/tls"
    for i in $(seq 0 $((n - 1))); do member_start "$i" new; done
    wait_healthy $(seq 0 $((n - 1)))
    if secure; then secure_auth; fi
    log "ready: $n member(s) from 127.0.0.1:$base (state in $dir)"
    ;;
  stop)
    if [ -f "$dir/members" ]; then for i in $(seq 0 $(( $(members) - 1 ))); do member_stop "$i"; done; fi
    rm -rf "$dir"
    ;;
  kill) member_stop "${3:?I}" KILL ;;
  touch-password) touch_password "${3:?USER}" ;;
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
    if [ "${5:-}" = secure ]; then echo "etcds://$spec"; else echo "etcd://$spec"; fi
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
