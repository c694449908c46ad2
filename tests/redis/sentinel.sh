#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A replicated Redis for coord's failover tests: a master on PORT, its
# replica on PORT+1 and three Sentinels on PORT+2 to PORT+4 (quorum 2,
# master name coord-master, down after 1 s), all plain processes on
# 127.0.0.1 with their state under DIR; master and replica durable
# (appendonly yes, appendfsync always), replication asynchronous as Redis's
# is. Installs redis-server when it is missing and the user is root
# (tests/redis/redis.sh install). ctest runs `start` and `stop` as the
# fixture RedisSentinel; a test may `start` again for a fresh topology.
#
#   tests/redis/sentinel.sh start DIR PORT     # fresh servers, empty data, replica in sync
#   tests/redis/sentinel.sh stop DIR           # every process stopped, DIR removed
#   tests/redis/sentinel.sh master DIR         # the port the Sentinels name as master now
#   tests/redis/sentinel.sh replicated DIR     # waits until the replica has every write
#                                              # of the master (WAIT 1), fails after 10 s
#   tests/redis/sentinel.sh pause-replica DIR  # SIGSTOP the replica and cut its link (the
#                                              # master closes it): it misses what comes
#   tests/redis/sentinel.sh resume-replica DIR # SIGCONT it
#   tests/redis/sentinel.sh kill-master DIR    # SIGKILL the master, SIGCONT the others,
#                                              # then waits (30 s at most) until the
#                                              # Sentinels name another server that says
#                                              # it is a master
#   tests/redis/sentinel.sh failover DIR       # SENTINEL FAILOVER (the master alive, made
#                                              # the replica); waits until it is done
#   tests/redis/sentinel.sh pause-master DIR   # SIGSTOP the master (resume: SIGCONT every process)
#   tests/redis/sentinel.sh resume DIR
#   tests/redis/sentinel.sh rejoin DIR         # a killed server started again on its data, as the
#                                              # replica of the master the Sentinels name
#   tests/redis/sentinel.sh settled DIR        # waits (30 s at most) until the Sentinels' master
#                                              # says it is one and the other server replicates it
#   tests/redis/sentinel.sh gid DIR master|replica|sentinels  # the group id that side runs with
#   tests/redis/sentinel.sh conninfo DIR PORT  # redis+sentinel://...:PORT+2,+3,+4/coord-master
#
# With COORD_MEMBER_GID_BASE=G set at start (the fault suite, in its network
# namespace), the server started as master runs with group id G, the one
# started as replica G+1 and the Sentinels G+2 (tests/process.sh,
# as_member), so that iptables' owner match can cut the master off from the
# others while its clients still reach it.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=tests/process.sh
source "$here/../process.sh"

cmd="${1:-}"
dir="${2:-}"
port="${3:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|master|replicated|pause-replica|resume-replica|kill-master|failover|pause-master|resume|rejoin|settled|gid|conninfo DIR [PORT]" >&2; exit 2; }
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
role=""
[ "$cmd" = gid ] && { role=$port; port=""; }
[ -z "$port" ] && [ -f "$dir/port" ] && port=$(cat "$dir/port")
name=coord-master

log() { printf '[sentinel.sh] %s\n' "$*" >&2; }
cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}" 2>/dev/null; }
sentinel_ports() { echo $((port + 2)) $((port + 3)) $((port + 4)); }

# Master and replica keep every acknowledged write on their disk.
durable=(--appendonly yes --appendfsync always --save '')
# start_one NAME PORT ARGS...: a server (or Sentinel) in DIR/NAME, its pid in DIR/NAME/pid.
start_one() {
  local n=$1 p=$2; shift 2
  mkdir -p "$dir/$n"
  case "$n" in master) as_member 0 ;; replica) as_member 1 ;; *) as_member 2 ;; esac
  setsid "${member_prefix[@]}" redis-server "$@" --bind 127.0.0.1 --port "$p" --protected-mode yes --daemonize no \
    --dir "$dir/$n" --logfile "$dir/$n/log" </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/$n/pid"
}
# The directory (master or replica) of the server on port $1.
name_of_port() { if [ "$1" = "$port" ]; then echo master; else echo replica; fi; }
wait_ping() {
  local n=$1 p=$2 i
  for i in $(seq 1 600); do
    [ "$(cli "$p" ping)" = PONG ] && return 0
    alive "$(cat "$dir/$n/pid")" || { log "$n died at startup:"; tail -n 20 "$dir/$n/log" >&2; exit 1; }
    sleep 0.05
  done
  log "$n not ready after 30 s"; tail -n 20 "$dir/$n/log" >&2; exit 1
}
stop_all() {
  local f pid
  for f in "$dir"/*/pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    alive "$pid" || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$dir"/*/pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 1 200); do alive "$pid" || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}
master_port() {  # the master the first Sentinel that answers names
  local s out
  for s in $(sentinel_ports); do
    out=$(cli "$s" sentinel get-master-addr-by-name "$name" | sed -n 2p)
    [ -n "$out" ] && { echo "$out"; return 0; }
  done
  return 1
}

case "$cmd" in
  start)
    [ -n "$port" ] || { log "start needs a PORT"; exit 2; }
    bash "$here/redis.sh" install
    stop_all
    rm -rf "$dir"; mkdir -p "$dir"
    echo "$port" > "$dir/port"
    echo "${COORD_MEMBER_GID_BASE:-}" > "$dir/gid-base"
    start_one master "$port" "${durable[@]}"
    wait_ping master "$port"
    start_one replica $((port + 1)) "${durable[@]}" --replicaof 127.0.0.1 "$port"
    wait_ping replica $((port + 1))
    for i in $(seq 1 600); do
      [ "$(cli $((port + 1)) info replication | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ] && break
      sleep 0.05
    done
    i=0
    for s in $(sentinel_ports); do
      i=$((i + 1))
      mkdir -p "$dir/sentinel$i"
      {
        echo "sentinel monitor $name 127.0.0.1 $port 2"
        echo "sentinel down-after-milliseconds $name 1000"
        echo "sentinel failover-timeout $name 5000"
        echo "sentinel parallel-syncs $name 1"
      } > "$dir/sentinel$i/sentinel.conf"
      start_one "sentinel$i" "$s" "$dir/sentinel$i/sentinel.conf" --sentinel
    done
    i=0
    for s in $(sentinel_ports); do i=$((i + 1)); wait_ping "sentinel$i" "$s"; done
    # Every Sentinel knows the replica and the other Sentinels before a test
    # kills anything (a failover needs the quorum and a known replica).
    for _ in $(seq 1 600); do
      ready=1
      for s in $(sentinel_ports); do
        info=$(cli "$s" sentinel master "$name" | tr -d '\r' | paste -sd' ')
        echo "$info" | grep -q 'num-slaves 1' || ready=0
        echo "$info" | grep -q 'num-other-sentinels 2' || ready=0
      done
      [ "$ready" = 1 ] && break
      sleep 0.1
    done
    [ "$ready" = 1 ] || { log "the Sentinels did not find each other and the replica in 60 s"; exit 1; }
    log "ready: master 127.0.0.1:$port, replica :$((port + 1)), Sentinels :$((port + 2))-$((port + 4)) (state in $dir)"
    ;;
  stop)
    stop_all
    rm -rf "$dir"
    ;;
  master)
    master_port
    ;;
  replicated)
    m=$(master_port)
    [ "$(cli "$m" wait 1 10000)" = 1 ] || { log "the replica did not confirm the master's writes in 10 s"; exit 1; }
    ;;
  pause-replica|resume-replica)
    m=$(master_port)
    # The replica is whichever of the two servers is not the master now.
    if [ "$m" = "$port" ]; then r=replica; else r=master; fi
    if [ "$cmd" = pause-replica ]; then
      kill -STOP "$(cat "$dir/$r/pid")"
      # Its link cut too: what the master sent would wait in the stopped
      # replica's socket buffer and arrive after all.
      [ "$(cli "$m" client kill type replica)" -ge 1 ] || { log "the master had no replica link to cut"; exit 1; }
    else
      kill -CONT "$(cat "$dir/$r/pid")"
    fi
    ;;
  kill-master)
    m=$(master_port)
    if [ "$m" = "$port" ]; then n=master; else n=replica; fi
    pid=$(cat "$dir/$n/pid")
    kill -KILL "$pid"
    for _ in $(seq 1 200); do alive "$pid" || break; sleep 0.05; done
    for f in "$dir"/*/pid; do kill -CONT "$(cat "$f")" 2>/dev/null || true; done  # a paused replica runs again
    for _ in $(seq 1 600); do
      now=$(master_port || true)
      if [ -n "$now" ] && [ "$now" != "$m" ] && cli "$now" role | head -n 1 | grep -qx master; then
        log "failover: master :$m killed, :$now promoted"
        exit 0
      fi
      sleep 0.05
    done
    log "no failover within 30 s of killing :$m"; exit 1
    ;;
  failover)
    m=$(master_port)
    [ "$(cli $((port + 2)) sentinel failover "$name")" = OK ] || { log "SENTINEL FAILOVER refused"; exit 1; }
    for _ in $(seq 1 600); do
      now=$(master_port || true)
      if [ -n "$now" ] && [ "$now" != "$m" ] && cli "$now" role | head -n 1 | grep -qx master &&
         cli "$m" role | head -n 1 | grep -qx slave; then
        log "failover: :$now promoted, :$m its replica now"
        exit 0
      fi
      sleep 0.05
    done
    log "no failover within 30 s of asking for one"; exit 1
    ;;
  pause-master)
    kill -STOP "$(cat "$dir/$(name_of_port "$(master_port)")/pid")"
    ;;
  resume)
    for f in "$dir"/*/pid; do [ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null || true; done
    ;;
  rejoin)
    m=$(master_port)
    for n in master replica; do
      alive "$(cat "$dir/$n/pid")" && continue
      p=$port; [ "$n" = replica ] && p=$((port + 1))
      start_one "$n" "$p" "${durable[@]}" --replicaof 127.0.0.1 "$m"
      wait_ping "$n" "$p"
    done
    "$0" settled "$dir"
    ;;
  settled)
    for _ in $(seq 1 600); do
      m=$(master_port || true)
      if [ -n "$m" ]; then
        r=$port; [ "$m" = "$port" ] && r=$((port + 1))
        info=$(cli "$r" info replication | tr -d '\r')
        if cli "$m" role | head -n 1 | grep -qx master && echo "$info" | grep -qx "master_port:$m" &&
           echo "$info" | grep -qx 'master_link_status:up'; then
          exit 0
        fi
      fi
      sleep 0.05
    done
    log "not settled in 30 s: the Sentinels name :${m:-none}"; exit 1
    ;;
  gid)
    g=$(cat "$dir/gid-base")
    [ -n "$g" ] || { log "started without COORD_MEMBER_GID_BASE"; exit 1; }
    case "$role" in
      master) echo $((g + $([ "$(name_of_port "$(master_port)")" = master ] && echo 0 || echo 1))) ;;
      replica) echo $((g + $([ "$(name_of_port "$(master_port)")" = master ] && echo 1 || echo 0))) ;;
      sentinels) echo $((g + 2)) ;;
      *) log "gid: master, replica or sentinels"; exit 2 ;;
    esac
    ;;
  conninfo)
    echo "redis+sentinel://127.0.0.1:$((port + 2)),127.0.0.1:$((port + 3)),127.0.0.1:$((port + 4))/$name"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
