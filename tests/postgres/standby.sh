#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A replicated PostgreSQL for coord's failover tests: a primary on PORT and a
# streaming standby on PORT+1 (pg_basebackup -R), plain processes on
# 127.0.0.1 with their state and sockets under DIR, fsync and synchronous
# commit on. Replication is asynchronous, or with `sync` synchronous with
# remote_apply (a commit is acknowledged once the standby applied it).
# Installs postgresql-15 when it is missing and the user is root
# (tests/postgres/postgres.sh install). ctest runs `start` and `stop` as the
# fixture PostgresStandby; a test may `start` again for a fresh pair.
#
#   tests/postgres/standby.sh start DIR PORT [async|sync]
#   tests/postgres/standby.sh stop DIR
#   tests/postgres/standby.sh caught-up DIR      # waits until the standby replayed every
#                                                # commit of the primary (10 s at most)
#   tests/postgres/standby.sh cut-standby DIR    # SIGSTOP the standby and end its
#                                                # replication connection: it misses what
#                                                # the primary commits from now on
#   tests/postgres/standby.sh kill-primary DIR   # SIGKILL the primary and its backends,
#                                                # SIGCONT the standby, promote it, wait
#                                                # until it takes writes
#   tests/postgres/standby.sh rebuild DIR        # after kill-primary: the killed server made
#                                                # the new primary's standby (pg_basebackup),
#                                                # synchronous again in sync mode: the pair
#                                                # can fail over again, the other way
#   tests/postgres/standby.sh pause|resume DIR primary|standby  # SIGSTOP / SIGCONT that server
#   tests/postgres/standby.sh primary-port DIR   # the port of the server that is primary now
#   tests/postgres/standby.sh conninfo DIR PORT  # both hosts, target_session_attrs=read-write
#
# The servers live in DIR/primary (PORT) and DIR/standby (PORT+1) whatever
# their roles; DIR/primary-name says which is primary now.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

cmd="${1:-}"
dir="${2:-}"
port="${3:-}"
mode="${4:-async}"
pg_bin="${COORD_PG_BIN:-/usr/lib/postgresql/15/bin}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|caught-up|cut-standby|kill-primary|rebuild|pause|resume|primary-port|conninfo DIR [PORT] [async|sync]" >&2; exit 2; }
case "$mode" in async|sync) ;; *) echo "mode must be async or sync, got $mode" >&2; exit 2 ;; esac
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
role=""
case "$cmd" in pause|resume) role="$port" port="" ;; esac
[ -z "$port" ] && [ -f "$dir/port" ] && port=$(cat "$dir/port")
cd /  # the server user may not be able to enter the caller's directory

log() { printf '[standby.sh] %s\n' "$*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_user() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }
psql_at() { as_pg "$pg_bin/psql" -qtA -h "$dir" -p "$1" -U "$(pg_user)" -d postgres -v ON_ERROR_STOP=1 -c "$2"; }

# start_server NAME PORT [SETTINGS...]: DIR/NAME/data on PORT.
start_server() {
  local n=$1 p=$2; shift 2
  as_pg "$pg_bin/pg_ctl" -D "$dir/$n/data" -l "$dir/$n/log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $p -c unix_socket_directories=$dir -c fsync=on -c max_connections=200 $*" \
    >/dev/null || { log "$n did not start; log tail:"; tail -n 30 "$dir/$n/log" >&2; exit 1; }
}
stop_server() {
  [ -f "$dir/$1/data/postmaster.pid" ] || return 0
  local pm; pm="$(head -n 1 "$dir/$1/data/postmaster.pid")"
  kill -CONT "$pm" 2>/dev/null || true
  pkill -CONT -P "$pm" 2>/dev/null || true
  as_pg "$pg_bin/pg_ctl" -D "$dir/$1/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
}
kill_server() {  # SIGKILL the postmaster and its children, wait until gone
  [ -f "$dir/$1/data/postmaster.pid" ] || return 0
  local pm kids p; pm="$(head -n 1 "$dir/$1/data/postmaster.pid")"
  kids="$(pgrep -P "$pm" || true)"
  # shellcheck disable=SC2086
  kill -KILL "$pm" $kids 2>/dev/null || true
  for p in $pm $kids; do
    for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
}
# The servers by role: their directories' names, and their ports.
primary_name() { cat "$dir/primary-name" 2>/dev/null || echo primary; }
standby_name() { if [ "$(primary_name)" = primary ]; then echo standby; else echo primary; fi; }
port_of() { if [ "$1" = primary ]; then echo "$port"; else echo $((port + 1)); fi; }
# Once the standby streams: the primary's commits wait for it to apply them.
make_sync() {
  local p; p=$(port_of "$(primary_name)")
  psql_at "$p" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
  psql_at "$p" "ALTER SYSTEM SET synchronous_commit = 'remote_apply'" >/dev/null
  psql_at "$p" "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 600); do
    [ "$(psql_at "$p" "SELECT sync_state FROM pg_stat_replication")" = sync ] && return 0
    sleep 0.05
  done
  log "the standby is not synchronous"; exit 1
}
wait_streaming() {
  local p; p=$(port_of "$(primary_name)")
  for _ in $(seq 1 600); do
    [ "$(psql_at "$p" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && return 0
    sleep 0.05
  done
  log "the standby is not streaming after 30 s"; tail -n 20 "$dir/$(standby_name)/log" >&2; exit 1
}
signal_server() {  # signal_server NAME SIG: the postmaster and its children
  local pm; pm="$(head -n 1 "$dir/$1/data/postmaster.pid")"
  if [ "$2" = STOP ]; then kill -STOP "$pm"; pkill -STOP -P "$pm" || true
  else pkill -CONT -P "$pm" || true; kill -CONT "$pm"; fi
}

case "$cmd" in
  start)
    [ -n "$port" ] || { log "start needs a PORT"; exit 2; }
    bash "$here/postgres.sh" install
    stop_server standby; stop_server primary
    rm -rf "$dir"; mkdir -p "$dir/primary" "$dir/standby"
    echo "$port" > "$dir/port"
    [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$dir"
    as_pg "$pg_bin/initdb" -D "$dir/primary/data" -U "$(pg_user)" -A trust -E UTF8 --locale=C.UTF-8 --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    start_server primary "$port"
    psql_at "$port" 'CREATE DATABASE coord' >/dev/null
    as_pg "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$port" -U "$(pg_user)" -D "$dir/standby/data" -R -X stream \
      -c fast >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server standby $((port + 1)) -c hot_standby=on
    echo primary > "$dir/primary-name"; echo "$mode" > "$dir/mode"
    wait_streaming
    if [ "$mode" = sync ]; then make_sync; fi  # once the standby streams: commits before it would wait for none
    log "ready: primary 127.0.0.1:$port, standby :$((port + 1)), $mode replication (state in $dir)"
    ;;
  stop)
    stop_server standby; stop_server primary
    rm -rf "$dir"
    ;;
  caught-up)
    p=$(port_of "$(primary_name)")
    for _ in $(seq 1 200); do
      [ "$(psql_at "$p" "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= pg_current_wal_lsn()")" = 1 ] && exit 0
      sleep 0.05
    done
    log "the standby did not replay the primary's commits in 10 s"; exit 1
    ;;
  cut-standby)
    signal_server "$(standby_name)" STOP
    # The walsender ends: what it had sent and the standby did not read yet
    # is all the standby will have.
    p=$(port_of "$(primary_name)")
    psql_at "$p" "SELECT pg_terminate_backend(pid) FROM pg_stat_replication" >/dev/null
    for _ in $(seq 1 200); do
      [ "$(psql_at "$p" "SELECT count(*) FROM pg_stat_replication")" = 0 ] && break
      sleep 0.05
    done
    ;;
  kill-primary)
    old=$(primary_name) new=$(standby_name)
    kill_server "$old"
    signal_server "$new" CONT
    as_pg "$pg_bin/pg_ctl" -D "$dir/$new/data" -w -t 60 promote >/dev/null ||
      { log "promotion failed"; tail -n 20 "$dir/$new/log" >&2; exit 1; }
    echo "$new" > "$dir/primary-name"
    for _ in $(seq 1 600); do
      [ "$(psql_at "$(port_of "$new")" 'SELECT pg_is_in_recovery()')" = f ] && break
      sleep 0.05
    done
    [ "$(psql_at "$(port_of "$new")" 'SELECT pg_is_in_recovery()')" = f ] ||
      { log "the standby still in recovery 30 s after its promotion"; exit 1; }
    # Alone now: its commits wait for no standby (a copy of a synchronous
    # primary's settings would make them wait for one) until rebuild.
    psql_at "$(port_of "$new")" "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
    psql_at "$(port_of "$new")" "SELECT pg_reload_conf()" >/dev/null
    log "standby :$(port_of "$new") promoted"
    ;;
  rebuild)
    s=$(standby_name)
    kill_server "$s"
    rm -rf "${dir:?}/$s/data"
    as_pg "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$(port_of "$(primary_name)")" -U "$(pg_user)" -D "$dir/$s/data" -R \
      -X stream -c fast >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server "$s" "$(port_of "$s")" -c hot_standby=on
    wait_streaming
    if [ "$(cat "$dir/mode")" = sync ]; then make_sync; fi
    log "$s (:$(port_of "$s")) rebuilt: the standby of :$(port_of "$(primary_name)")"
    ;;
  pause|resume)
    case "$role" in primary) n=$(primary_name) ;; standby) n=$(standby_name) ;; *) echo "$cmd: primary or standby" >&2; exit 2 ;; esac
    if [ "$cmd" = pause ]; then signal_server "$n" STOP; else signal_server "$n" CONT; fi
    ;;
  primary-port)
    port_of "$(primary_name)"
    ;;
  conninfo)
    echo "host=127.0.0.1,127.0.0.1 port=$port,$((port + 1)) user=$(pg_user) dbname=coord target_session_attrs=read-write connect_timeout=2"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
