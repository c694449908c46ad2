#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fault suite: the same workloads on one store while a schedule of
# faults drawn from a seed runs, every operation recorded, one checker for
# the whole history (tests/faults/checker.hpp), and a control that must fail.
#
#   tests/faults/run.sh --engine ENGINE [--seconds N] [--seed S] [--out DIR] [--build DIR]
#
# ENGINE: file, sqlite, postgres, redis, etcd or zookeeper (one server), or
# etcd-cluster or zookeeper-ensemble (three members: the leader killed,
# paused and cut off from the majority, elections), or postgres-standby (a
# primary and its synchronous standby: the primary killed and the standby
# promoted, the standby stopped under the primary's commits), or
# redis-sentinel (a master, its replica and three Sentinels: the master
# killed, paused and cut off from the others, failovers; replication is
# asynchronous, so a failover may lose acknowledged writes by design: the
# run then checks that coord detected the loss, state_went_back, and runs
# the recovery of docs/concepts/went-back.md). The servers are
# started here through the project's own scripts (tests/<engine>.sh, with
# the engine's durable settings: PostgreSQL's fsync and synchronous commit,
# Redis appendfsync always, etcd's fsync, ZooKeeper forceSync=yes), on ports
# of their own, state under /tmp.
# As root, the whole run happens in a network namespace made here (so a
# partition is iptables rules on that namespace's loopback, nothing outside
# it is touched). --build: the build tree holding coord_fault_client,
# coord_fault_check and coordctl (default build/default).
#
# Writes DIR/history.jsonl (every workload and the faults), DIR/control.jsonl,
# DIR/schedule.txt (the faults the seed drew: the same seed, the same
# schedule), DIR/summary.json, DIR/timeline.svg; prints the table; exits 1 on
# any violation, or when the control shows none (then the run proved nothing);
# on redis-sentinel, violations pass only as the by-design loss of a
# failover that coord detected (summary.json: went_back, recoveries).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
engine="" seconds=20 seed=1 out="" build="$root/build/default" dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    *) echo "usage: $0 --engine file|sqlite|postgres|redis|etcd|zookeeper|etcd-cluster|zookeeper-ensemble|postgres-standby|redis-sentinel [--seconds N] [--seed S] [--out DIR] [--build DIR] [--dry-run]" >&2; exit 2 ;;
  esac
done
# family: the engine (its scripts in tests/F/); members: 3 for a cluster, 2
# for a primary and its standby, or a master and its replica.
case "$engine" in
  file|sqlite|postgres|redis|etcd|zookeeper) family=$engine members=1 ;;
  etcd-cluster) family=etcd members=3 ;;
  zookeeper-ensemble) family=zookeeper members=3 ;;
  postgres-standby) family=postgres members=2 ;;
  redis-sentinel) family=redis members=2 ;;
  *) echo "$0: --engine must be file, sqlite, postgres, redis, etcd, zookeeper, etcd-cluster, zookeeper-ensemble, postgres-standby or redis-sentinel" >&2; exit 2 ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 10 ] && [ "$seconds" -le 3600 ] || { echo "$0: --seconds must be 10..3600" >&2; exit 2; }
[[ "$seed" =~ ^[0-9]+$ ]] && [ "$seed" -le 2147483647 ] || { echo "$0: --seed must be 0..2147483647" >&2; exit 2; }
[ -n "$out" ] || out="/tmp/coord-faults/$engine"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
client="$build/tests/coord_fault_client" check="$build/tests/coord_fault_check" coordctl="$build/examples/coordctl"
[ "$dry" = 1 ] || for b in "$client" "$check" "$coordctl"; do
  [ -x "$b" ] || { echo "$0: $b is missing: build first (cmake --workflow --preset default)" >&2; exit 2; }
done
log() { printf '[faults %s] %s\n' "$engine" "$*" >&2; }
# shellcheck source=tests/apt_install.sh
source "$root/tests/apt_install.sh"

server=1
case "$engine" in file|sqlite) server=0 ;; esac

# As root: run again inside a network namespace of its own.
if [ "$dry" = 0 ] && [ "$server" = 1 ] && [ -z "${COORD_FAULTS_NETNS:-}" ] && [ "$(id -u)" = 0 ]; then
  command -v iptables >/dev/null || { log "installing iptables"; apt_install iptables; }
  ns="coord-faults-$engine-$$"
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  rc=0
  ip netns exec "$ns" env COORD_FAULTS_NETNS="$ns" bash "$0" --engine "$engine" --seconds "$seconds" --seed "$seed" \
    --out "$out" --build "$build" || rc=$?
  ip netns del "$ns" || true
  exit "$rc"
fi
netns="${COORD_FAULTS_NETNS:-}"
# Partitions need the namespace (a dry run as root draws what the run would).
partitions=0
[ -n "$netns" ] && partitions=1
[ "$dry" = 1 ] && [ "$(id -u)" = 0 ] && partitions=1

state="/tmp/coord-faults-$engine"
now() { "$client" now; }
faketime_lib=""
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/*/faketime/libfaketime.so.1; do
  [ -f "$f" ] && { faketime_lib="$f"; break; }
done

declare -A not_run=()
workloads=(register control ids ledger durability)
if [ "$family" = etcd ]; then
  workloads=(register control ids durability)
  not_run[ledger]="etcd keeps no job ledger (no server clock to judge a replay window on)"
fi
faults=(client-pause client-kill clock)
if [ "$engine" = redis-sentinel ]; then
  # A master, its replica, three Sentinels (down after 1 s): the master
  # killed (the replica promoted, the old master back as its replica),
  # paused past the failover, and cut off from the replica and the
  # Sentinels while its clients still reach it (the split brain of
  # asynchronous replication); partition and connection-cut are about the
  # master's port.
  faults+=(master-kill master-pause)
  if [ "$partitions" = 1 ]; then faults+=(master-partition partition connection-cut)
  else
    for k in master-partition partition connection-cut; do not_run[$k]="needs root (a network namespace and iptables)"; done
  fi
elif [ "$members" = 2 ]; then
  # A primary and its synchronous standby: a failover (the standby
  # promoted, the old primary rebuilt as its standby), and the standby
  # stopped (the primary's commits wait for it); partition and
  # connection-cut are about the primary's client port.
  faults+=(primary-kill primary-pause standby-pause)
  if [ "$partitions" = 1 ]; then faults+=(partition connection-cut)
  else
    for k in partition connection-cut; do not_run[$k]="needs root (a network namespace and iptables)"; done
  fi
elif [ "$members" = 3 ]; then
  # A cluster: the member that leads at the fault's start is its target;
  # partition and connection-cut are about the leader's client port.
  faults+=(leader-kill leader-pause)
  if [ "$partitions" = 1 ]; then faults+=(leader-partition partition connection-cut)
  else
    for k in leader-partition partition connection-cut; do not_run[$k]="needs root (a network namespace and iptables)"; done
  fi
elif [ "$server" = 1 ]; then
  faults+=(server-kill server-pause)
  if [ "$partitions" = 1 ]; then faults+=(partition connection-cut)
  else
    not_run[partition]="needs root (a network namespace and iptables)"
    not_run[connection-cut]="needs root (a network namespace and iptables)"
  fi
else
  for k in server-kill server-pause partition connection-cut; do
    not_run[$k]="embedded store: no server and no network (a client SIGKILL is the crash)"
  done
fi
if [ -z "$faketime_lib" ]; then
  faults=("${faults[@]/clock/}")
  not_run[clock]="libfaketime is not installed (apt-get install faketime)"
fi

# --- the schedule, drawn from the seed ---------------------------------------
# Rounds through the fault kinds in an order shuffled per round; each fault
# has a duration and a gap after it drawn here. Targets are drawn here too
# (a client index); which process holds a lease at that moment is the run's.
RANDOM=$seed
kinds=()
for k in "${faults[@]}"; do [ -n "$k" ] && kinds+=("$k"); done
# (Sets d: no $(...), whose subshell would draw from a reseeded RANDOM.)
dur_of() {  # ms: a client pause outlives the 2 s lease and the 1.5 s ledger lease
  case "$1" in
    client-pause) d=$(( 2600 + RANDOM % 600 )) ;;
    client-kill) d=200 ;;
    clock) d=$(( 2500 + RANDOM % 500 )) ;;
    server-kill) d=$(( 500 + RANDOM % 1000 )) ;;
    server-pause) d=$(( 1500 + RANDOM % 1000 )) ;;
    leader-kill) d=$(( 500 + RANDOM % 1000 )) ;;
    leader-pause) d=$(( 1500 + RANDOM % 1000 )) ;;
    leader-partition) d=$(( 2500 + RANDOM % 1000 )) ;;
    primary-kill) d=200 ;;
    primary-pause|standby-pause) d=$(( 1500 + RANDOM % 1000 )) ;;
    master-kill) d=200 ;;
    master-pause|master-partition) d=$(( 3000 + RANDOM % 1500 )) ;;  # past the failover's 2 to 3 s
    partition) d=$(( 1500 + RANDOM % 1000 )) ;;
    connection-cut) d=300 ;;
  esac
}
schedule=$(mktemp)
: > "$schedule"
budget=$(( seconds * 1000 - 2000 )) at=1000
round=0
while [ "$at" -lt "$budget" ]; do
  order=("${kinds[@]}")
  for ((i = ${#order[@]} - 1; i > 0; i--)); do j=$(( RANDOM % (i + 1) )); t=${order[i]}; order[i]=${order[j]}; order[j]=$t; done
  # Every run opens with a client pause: the fault the control must be
  # caught under, whatever the run's length; on a cluster the leader's
  # faults follow at once, so that a short run (CI's 20 s, its schedule
  # drifting behind loaded pauses and restarts) still takes each.
  if [ "$round" = 0 ]; then
    first=(client-pause)
    [ "$members" = 3 ] && first+=(leader-kill leader-partition leader-pause)
    [ "$engine" = postgres-standby ] && first+=(primary-kill standby-pause)
    [ "$engine" = redis-sentinel ] && first+=(master-partition master-kill master-pause)
    rest=()
    for k in "${order[@]}"; do [[ " ${first[*]} " == *" $k "* ]] || rest+=("$k"); done
    order=()
    for k in "${first[@]}"; do [[ " ${kinds[*]} " == *" $k "* ]] && order+=("$k"); done
    order+=("${rest[@]}")
  fi
  round=$((round + 1))
  for k in "${order[@]}"; do
    [ -n "$k" ] || continue
    dur_of "$k"
    target=$(( RANDOM % 3 ))
    [ $(( at + d )) -lt "$budget" ] || break 2
    echo "$at $k $d $target" >> "$schedule"
    at=$(( at + d + 300 + RANDOM % 300 ))
  done
done

if [ "$dry" = 1 ]; then
  cat "$schedule"
  rm -f "$schedule"
  exit 0
fi
rm -rf "$out"
mkdir -p "$out/h" "$out/pids" "$out/went-back"
cp "$schedule" "$out/schedule.txt"
rm -f "$schedule"

# --- the store -------------------------------------------------------------
srv="$root/tests/$family/$family.sh"  # the server's script
[ "$engine" = postgres-standby ] && srv="$root/tests/postgres/standby.sh"
[ "$engine" = redis-sentinel ] && srv="$root/tests/redis/sentinel.sh"
stop_server() {
  case "$family" in
    postgres|redis|etcd|zookeeper) bash "$srv" stop "$state" ;;
    *) rm -rf "$state" ;;
  esac
}
trap stop_server EXIT
port=""
case "$engine" in
  file) rm -rf "$state"; mkdir -p "$state"; store="file:$state/store" ;;
  sqlite) rm -rf "$state"; mkdir -p "$state"; store="sqlite:$state/store.db" ;;
  postgres)
    port=23432
    bash "$root/tests/postgres/postgres.sh" start "$state" "$port" durable
    store="postgres:$(bash "$root/tests/postgres/postgres.sh" conninfo "$state" "$port")" ;;
  redis)
    port=23379
    bash "$root/tests/redis/redis.sh" start "$state" "$port"
    store="$(bash "$root/tests/redis/redis.sh" conninfo "$state" "$port")/0" ;;
  postgres-standby)
    port=13540
    bash "$srv" start "$state" "$port" sync
    store="postgres:$(bash "$srv" conninfo "$state" "$port")" ;;
  redis-sentinel)
    port=13560
    # The master, the replica and the Sentinels run with group ids of their
    # own (master-partition's owner match).
    if [ -n "$netns" ]; then export COORD_MEMBER_GID_BASE=64100; fi
    bash "$srv" start "$state" "$port"
    unset COORD_MEMBER_GID_BASE
    store="$(bash "$srv" conninfo "$state" "$port")" ;;
  etcd|zookeeper|etcd-cluster|zookeeper-ensemble)
    case "$engine" in etcd) port=23390 ;; zookeeper) port=23400 ;; etcd-cluster) port=13500 ;; zookeeper-ensemble) port=13520 ;; esac
    # In the namespace, member i runs with group id 64100+i: iptables' owner
    # match tells its packets from the other members' (leader-partition).
    if [ -n "$netns" ]; then export COORD_MEMBER_GID_BASE=64100; fi
    bash "$srv" start "$state" "$port" "$members" durable
    unset COORD_MEMBER_GID_BASE
    store="$(bash "$srv" conninfo "$state" "$port" "$members")" ;;
esac
# Member I's client port, and the ports its peers connect to.
client_port() { if [ "$family" = etcd ]; then echo $(( port + 2 * $1 )); else echo $(( port + 3 * $1 )); fi; }
peer_ports() { if [ "$family" = etcd ]; then echo $(( port + 2 * $1 + 1 )); else echo "$(( port + 3 * $1 + 1 )),$(( port + 3 * $1 + 2 ))"; fi; }
"$coordctl" store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor none --force >/dev/null
"$client" setup --store "$store" --slots-at "$(( $(date +%s) * 1000 ))"

# --- the clients -----------------------------------------------------------
start=$(now)
until=$(( start + seconds * 1000000000 ))
slots_at=$(( ($(date +%s) - 60) * 1000 ))
slots=$(( seconds * 4 ))
declare -a sups=()
clients=()
# A client that saw the store go back (exit status 3: state_went_back, after
# a failover lost writes it saw acknowledged) leaves DIR/went-back/NAME and
# is not run again until the recovery (recover, below) removed it.
supervise() {  # NAME WORKLOAD INDEX: runs the client again whenever a fault killed it
  local name=$1 workload=$2 index=$3 hist="$out/h/$1.jsonl" extra=() rc
  [ "$workload" = register ] && extra=(--holder "$out/holder.register")
  [ "$workload" = control ] && extra=(--holder "$out/holder.control")
  while [ "$(now)" -lt "$until" ]; do
    while [ -e "$out/went-back/$name" ] || [ -e "$out/recovering" ]; do sleep 0.05; done
    if [ -f "$out/clock.$name" ]; then
      env FAKETIME="$(cat "$out/clock.$name")" FAKETIME_DONT_FAKE_MONOTONIC=1 LD_PRELOAD="$faketime_lib" \
        "$client" run --store "$store" --workload "$workload" --proc "$name" --history "$hist" --until "$until" \
        --index "$index" --slots-at "$slots_at" --slots "$slots" --start "$start" "${extra[@]}" 2>>"$out/clients.log" &
    else
      "$client" run --store "$store" --workload "$workload" --proc "$name" --history "$hist" --until "$until" \
        --index "$index" --slots-at "$slots_at" --slots "$slots" --start "$start" "${extra[@]}" 2>>"$out/clients.log" &
    fi
    local pid=$!
    echo "$pid" > "$out/pids/$name"
    rc=0; wait "$pid" || rc=$?
    if [ "$rc" = 3 ]; then
      echo "$name $(now)" >> "$out/went-back.log"
      : > "$out/went-back/$name"
    fi
    # libfaketime keeps a shared-memory segment and a semaphore named by the
    # pid, removed at exit: a SIGKILL leaves them, and a later faketime whose
    # pid is the same fails ("sem_open: File exists").
    rm -f "/dev/shm/faketime_shm_$pid" "/dev/shm/sem.faketime_sem_$pid"
  done
}
prefix_of() { case "$1" in register) echo reg ;; control) echo ctl ;; ids) echo ids ;; ledger) echo led ;; durability) echo dur ;; esac; }
for w in "${workloads[@]}"; do
  n=3; [ "$w" = durability ] && n=2
  for ((i = 0; i < n; i++)); do
    name="$(prefix_of "$w")-$i"
    clients+=("$name")
    supervise "$name" "$w" "$i" 2>/dev/null &  # (bash's "Killed" notices: the faults are in the history)
    sups+=($!)
  done
done

# --- the faults ------------------------------------------------------------
fault_line() {  # T0 KIND TARGET [EXTRA-JSON]
  printf '{"t0":%s,"t1":%s,"proc":"nemesis","f":"fault","kind":"%s","target":"%s","type":"ok"%s}\n' \
    "$1" "$(now)" "$2" "$3" "${4:-}" >> "$out/h/faults.jsonl"
}
# Sets extra to the leader now, or to none when no member claims the lead
# within 1.5 s (still electing, or the only claimant paused).
leader_after() {
  local a; a=$(timeout 1.5 bash "$srv" leader "$state" 2>/dev/null) || a=""
  extra=",\"leader_after\":\"${a:+m}${a:-none}\""
}
restarting=""
back() {  # waits for a member's restart (leader-kill) to finish
  [ -z "$restarting" ] || wait "$restarting" || { log "a member did not come back"; exit 1; }
  restarting=""
  # Sentinel: and for the demoted master to replicate the new one.
  [ "$engine" != redis-sentinel ] || bash "$srv" settled "$state" || { log "the Sentinels' servers did not settle"; exit 1; }
}
# The recovery (docs/stores/redis.md, "When a store lost its data"), once clients saw the
# store go back: every client stopped, the store initialized again with
# floors above what it handed out (the largest segment ID in the
# histories, the store's time for fences, the ledger and reservations),
# the clients started again.
recover() {
  compgen -G "$out/went-back/*" >/dev/null || return 0
  local t0 who floor c p i
  t0=$(now)
  : > "$out/recovering"
  sleep 0.2  # a supervisor between its check and its start
  for i in 1 2 3; do
    for c in "${clients[@]}"; do p=$(pid_of "$c"); [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true; done
    sleep 0.1
  done
  who=$(ls "$out/went-back" | paste -sd, -)
  floor=$(cat "$out"/h/*.jsonl | grep '"gen":"segment"' | grep '"type":"ok"' | grep -o '"id":"[0-9]*"' | grep -o '[0-9]*' |
    sort -n | tail -n 1 || true)
  # (Tried again for up to a minute: a failover may be under way.)
  local give_up=$(( $(now) + 60000000000 ))
  until "$coordctl" store init --store "$store" --force --segment-floor "${floor:-0}" --fence-floor now --ledger-floor now \
      >>"$out/recovery.log" 2>&1; do
    [ "$(now)" -lt "$give_up" ] || { log "the recovery failed:"; tail -n 5 "$out/recovery.log" >&2; return 1; }
    sleep 0.5
  done
  rm -f "$out"/went-back/* "$out/recovering"
  fault_line "$t0" recovery "$who" ",\"segment_floor\":${floor:-0}"
}
pid_of() { cat "$out/pids/$1" 2>/dev/null || true; }
holder() { cat "$out/holder.$1" 2>/dev/null || true; }
# Whether the control accepted a write with a token larger than $1.
control_newer() {
  local t
  t=$(cat "$out"/h/ctl-*.jsonl 2>/dev/null | grep -o '"token":[0-9]*,"type":"ok"' | grep -o '[0-9]*' | sort -n | tail -n 1 || true)
  [ -n "$t" ] && [ "$t" -gt "$1" ]
}
name_of_pid() { local c; for c in "${clients[@]}"; do [ "$(pid_of "$c")" = "$1" ] && { echo "$c"; return; }; done; }
sleep_ms() { sleep "$(printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )))"; }
server_down=0
fw() { iptables "$@"; }
heal() {
  if [ -n "$netns" ]; then fw -F INPUT 2>/dev/null || true; fw -F OUTPUT 2>/dev/null || true; fi
  for c in "${clients[@]}"; do p=$(pid_of "$c"); [ -n "$p" ] && kill -CONT "$p" 2>/dev/null || true; done
  case "$engine" in
    postgres-standby) for r in primary standby; do bash "$srv" resume "$state" "$r" 2>/dev/null || true; done ;;
    redis-sentinel) bash "$srv" resume "$state" 2>/dev/null || true ;;
    postgres|redis) bash "$srv" resume "$state" 2>/dev/null || true ;;
    etcd|zookeeper|etcd-cluster|zookeeper-ensemble)
      for ((m = 0; m < members; m++)); do bash "$srv" resume "$state" "$m" 2>/dev/null || true; done ;;
  esac
}
cleanup() {
  [ -z "${recoverer:-}" ] || kill "$recoverer" 2>/dev/null || true
  [ -z "$restarting" ] || wait "$restarting" 2>/dev/null || true
  heal
  for s in "${sups[@]}"; do kill "$s" 2>/dev/null || true; done
  for c in "${clients[@]}"; do
    p=$(pid_of "$c")
    [ -n "$p" ] || continue
    kill -KILL "$p" 2>/dev/null || true
    rm -f "/dev/shm/faketime_shm_$p" "/dev/shm/sem.faketime_sem_$p"
  done
  stop_server 2>/dev/null || true
}
trap cleanup EXIT

# Sets p to the client port that takes the writes now (the server's, a
# cluster's leader's, the primary's, the master's) and targets to its name.
writes_port() {
  local l
  case "$engine" in
    postgres-standby) p=$(bash "$srv" primary-port "$state"); targets=primary ;;
    redis-sentinel) p=$(bash "$srv" master "$state"); targets=master ;;
    *) if [ "$members" = 3 ]; then l=$(bash "$srv" leader "$state"); p=$(client_port "$l"); targets="m$l"
       else p=$port; targets=server; fi ;;
  esac
}
run_fault() {  # KIND DURATION_MS TARGET_INDEX
  local kind=$1 d=$2 ti=$3 t0 targets="" p c extra=""
  case "$kind" in client-*|clock) ;; *) back ;; esac
  t0=$(now)
  case "$kind" in
    client-pause)
      # The holders of both leases, mid-batch, and a worker of every other
      # workload: stopped past their leases. The holders stop themselves
      # right after a batch's first write when asked (the client's
      # pause_if_asked), so that five writes are still to come however
      # loaded the machine is. After the pause the control's holder stays
      # stopped until a rival has written with a newer token (the workers
      # resumed first: an embedded store's stopped worker may hold its file
      # lock), so that the control is always caught.
      local pids=() ctl="" w p tok ctl_tok="" end
      rm -f "$out"/holder.*.paused
      for w in register control; do : > "$out/holder.$w.pause"; done
      end=$(( ${EPOCHREALTIME/./} + 5000000 ))
      while [ "${EPOCHREALTIME/./}" -lt "$end" ]; do
        [ -s "$out/holder.register.paused" ] && [ -s "$out/holder.control.paused" ] && break
        sleep 0.02
      done
      for w in register control; do
        if [ ! -s "$out/holder.$w.paused" ] && ! mv "$out/holder.$w.pause" "$out/holder.$w.cancelled" 2>/dev/null; then
          sleep 0.2  # claimed just now: its answer is on the way
        fi
        [ -s "$out/holder.$w.paused" ] || continue
        read -r p tok < "$out/holder.$w.paused"
        if [ "$w" = control ]; then ctl=$p ctl_tok=$tok; else pids+=("$p"); fi
      done
      for w in ids led dur; do p=$(pid_of "$w-$ti"); [ -n "$p" ] && kill -STOP "$p" 2>/dev/null && pids+=("$p"); done
      for p in $ctl "${pids[@]}"; do targets+="${targets:+,}$(name_of_pid "$p")"; done
      sleep_ms "$d"
      for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
      if [ -n "$ctl" ]; then
        end=$(( ${EPOCHREALTIME/./} + 10000000 ))
        while [ "${EPOCHREALTIME/./}" -lt "$end" ] && ! control_newer "$ctl_tok"; do sleep 0.05; done
        kill -CONT "$ctl" 2>/dev/null || true
      fi ;;
    client-kill)
      for c in "reg-$ti" "ctl-$ti" "ids-$ti" "led-$ti" "dur-$((ti % 2))"; do
        p=$(pid_of "$c"); [ -n "$p" ] && kill -KILL "$p" 2>/dev/null && targets+="${targets:+,}$c"
      done
      sleep_ms "$d" ;;
    clock)
      # Index ti's clients restart (SIGKILL) on a faked clock: the lease and
      # ledger clients' runs at a quarter speed (a lease held too long by
      # their own reckoning), the ID client's is 30 s behind (a clock that
      # went back); then they restart on the real clock.
      local spec="+0 x0.25 (leases, ledger); -30s (ids)"
      for c in "reg-$ti" "ctl-$ti" "ids-$ti" "led-$ti"; do
        [ -f "$out/pids/$c" ] || continue
        if [ "${c%%-*}" = ids ]; then echo "-30s" > "$out/clock.$c"; else echo "+0 x0.25" > "$out/clock.$c"; fi
        p=$(pid_of "$c"); [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true
        targets+="${targets:+,}$c"
      done
      sleep_ms "$d"
      for c in "reg-$ti" "ctl-$ti" "ids-$ti" "led-$ti"; do
        [ -f "$out/clock.$c" ] || continue
        rm -f "$out/clock.$c"
        p=$(pid_of "$c"); [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true
      done
      fault_line "$t0" "$kind" "$targets" ",\"faketime\":\"$spec\""
      return ;;
    server-kill)
      targets=server
      case "$engine" in
        postgres) sleep_ms "$d"; bash "$root/tests/postgres/postgres.sh" kill "$state" "$port" ;;
        redis) sleep_ms "$d"; bash "$root/tests/redis/redis.sh" kill "$state" "$port" ;;
        etcd) bash "$root/tests/etcd/etcd.sh" kill "$state" 0; sleep_ms "$d"; bash "$root/tests/etcd/etcd.sh" restart "$state" 0 ;;
        zookeeper) bash "$root/tests/zookeeper/zookeeper.sh" kill "$state" 0; sleep_ms "$d"; bash "$root/tests/zookeeper/zookeeper.sh" restart "$state" 0 ;;
      esac ;;
    server-pause)
      targets=server
      case "$engine" in
        postgres|redis) bash "$root/tests/$engine/$engine.sh" pause "$state"; sleep_ms "$d"; bash "$root/tests/$engine/$engine.sh" resume "$state" ;;
        etcd|zookeeper) bash "$root/tests/$engine/$engine.sh" pause "$state" 0; sleep_ms "$d"; bash "$root/tests/$engine/$engine.sh" resume "$state" 0 ;;
      esac ;;
    leader-kill)
      # SIGKILL, an election among the others, then back on its data. Each
      # leader fault's line names the leader at its end (leader_after).
      # The restart (a member catching up takes seconds) goes on while the
      # next client faults run; a server fault waits for it first.
      local l; l=$(bash "$srv" leader "$state"); targets="m$l"
      bash "$srv" kill "$state" "$l"; sleep_ms "$d"; leader_after
      bash "$srv" restart "$state" "$l" &
      restarting=$! ;;
    primary-kill)
      # SIGKILL the primary, promote the standby (what a failover manager
      # would do; nothing acknowledged is lost: the commits waited for the
      # standby to apply them); the old primary is rebuilt as the new one's
      # standby while the next client faults run.
      targets=":$(bash "$srv" primary-port "$state")"
      bash "$srv" kill-primary "$state"; sleep_ms "$d"
      extra=",\"primary_after\":\":$(bash "$srv" primary-port "$state")\""
      bash "$srv" rebuild "$state" &
      restarting=$! ;;
    master-kill)
      # SIGKILL the master; the Sentinels promote the replica (kill-master
      # waits for it); the old master comes back on its data as the new
      # one's replica while the next client faults run.
      targets=":$(bash "$srv" master "$state")"
      bash "$srv" kill-master "$state"; sleep_ms "$d"
      extra=",\"master_after\":\":$(bash "$srv" master "$state")\""
      bash "$srv" rejoin "$state" >/dev/null &
      restarting=$! ;;
    master-pause)
      # SIGSTOP past the failover: on SIGCONT the old master takes writes
      # on the connections its clients kept until the Sentinels demote it.
      targets=":$(bash "$srv" master "$state")"
      bash "$srv" pause-master "$state"; sleep_ms "$d"
      extra=",\"master_after\":\":$(bash "$srv" master "$state")\""
      bash "$srv" resume "$state" ;;
    master-partition)
      # The master cut off from its replica and the Sentinels (the
      # connections they open to its port: iptables' owner match on their
      # group ids marks them, and every packet of a marked connection is
      # dropped), its clients still reaching it: the Sentinels promote the
      # replica, and both take writes until the partition heals and the
      # old master is demoted (what it took meanwhile is lost).
      local mp; mp=$(bash "$srv" master "$state"); targets=":$mp"
      for g in "$(bash "$srv" gid "$state" replica)" "$(bash "$srv" gid "$state" sentinels)"; do
        fw -A OUTPUT -p tcp --dport "$mp" -m owner --gid-owner "$g" -j CONNMARK --set-mark 7
      done
      fw -A OUTPUT -m connmark --mark 7 -j DROP
      sleep_ms "$d"
      extra=",\"master_after\":\":$(bash "$srv" master "$state")\""
      fw -F OUTPUT ;;
    primary-pause|standby-pause)
      local r=${kind%-pause}; targets=$r
      bash "$srv" pause "$state" "$r"; sleep_ms "$d"; bash "$srv" resume "$state" "$r" ;;
    leader-pause)
      local l; l=$(bash "$srv" leader "$state"); targets="m$l"
      bash "$srv" pause "$state" "$l"; sleep_ms "$d"; leader_after
      bash "$srv" resume "$state" "$l" ;;
    leader-partition)
      # The leader cut off from the other members (its clients still reach
      # it): every packet to or from its peer ports dropped, and every
      # packet it sends to theirs (the owner match: its group id).
      local l o others=""; l=$(bash "$srv" leader "$state"); targets="m$l"
      for ((o = 0; o < members; o++)); do [ "$o" = "$l" ] || others+="${others:+,}$(peer_ports "$o")"; done
      fw -I OUTPUT -p tcp -m multiport --ports "$(peer_ports "$l")" -j DROP
      fw -I OUTPUT -p tcp -m owner --gid-owner $(( 64100 + l )) -m multiport --dports "$others" -j DROP
      sleep_ms "$d"; leader_after
      fw -F OUTPUT ;;
    partition)
      # Every packet to and from the server's client port dropped (a
      # cluster's leader's: its clients move to another member).
      local p; writes_port
      fw -I INPUT -p tcp --dport "$p" -j DROP
      fw -I OUTPUT -p tcp --sport "$p" -j DROP
      sleep_ms "$d"
      fw -F INPUT; fw -F OUTPUT ;;
    connection-cut)
      # Every packet to the server (a cluster's leader) answered with a
      # reset: open connections break.
      local p; writes_port
      fw -I INPUT -p tcp --dport "$p" -j REJECT --reject-with tcp-reset
      sleep_ms "$d"
      fw -F INPUT ;;
  esac
  fault_line "$t0" "$kind" "$targets" "$extra"
}

log "store $store; $seconds s, seed $seed; faults: ${kinds[*]}"
# The recovery runs beside the faults, as soon as a client saw the store go
# back (an operator paged), until the clients' end.
recoverer=""
if [ "$engine" = redis-sentinel ]; then
  ( while [ "$(now)" -lt "$until" ] || compgen -G "$out/went-back/*" >/dev/null; do
      recover || exit 1
      sleep 0.1
    done ) &
  recoverer=$!
fi
while read -r at kind d ti; do
  wait_until=$(( start + at * 1000000 ))
  n=$(now); [ "$n" -lt "$wait_until" ] && sleep_ms $(( (wait_until - n) / 1000000 ))
  case "$kind" in client-*|clock) ;; *) back ;; esac
  # A fault late past its time (a cluster member's restart waits for it to
  # catch up) that would outlast the clients is not run: nothing to see.
  # After a Sentinel failover the old master is demoted only about 8 s after
  # the Sentinels see it again (a wait of Sentinel's own): the clients must
  # still be running then to see what it lost.
  tail=1000
  [ "$engine" = redis-sentinel ] && case "$kind" in master-pause|master-partition) tail=12000 ;; master-kill) tail=4000 ;; esac
  if [ "$(now)" -gt $(( until - (d + tail) * 1000000 )) ]; then log "not run: $kind at $at ms (the run ends first)"; continue; fi
  run_fault "$kind" "$d" "$ti"
done < "$out/schedule.txt"
back
heal
for s in "${sups[@]}"; do wait "$s" 2>/dev/null || true; done
sups=()
[ -z "$recoverer" ] || wait "$recoverer" || { log "the recovery failed"; exit 1; }
recoverer=""

# --- the final reads -------------------------------------------------------
finals=0
for w in "${workloads[@]}"; do
  case "$w" in
    ledger) "$client" final --store "$store" --workload ledger --proc final --history "$out/h/final-ledger.jsonl" \
              --slots-at "$slots_at" --slots "$slots" 2>>"$out/clients.log" || finals=1 ;;
    durability)
      for i in 0 1; do
        [ -f "$out/h/dur-$i.jsonl" ] || continue
        "$client" final --store "$store" --workload durability --proc "dur-$i" --history "$out/h/dur-$i.jsonl" \
          2>>"$out/clients.log" || finals=1
      done ;;
  esac
done
[ "$finals" = 0 ] || { log "a final read failed:"; tail -n 20 "$out/clients.log" >&2; }

# --- the check -------------------------------------------------------------
cat "$out"/h/ctl-*.jsonl > "$out/control.jsonl" 2>/dev/null || : > "$out/control.jsonl"
find "$out/h" -name '*.jsonl' ! -name 'ctl-*' -print0 | sort -z | xargs -0 cat > "$out/history.jsonl"
meta=(--meta "engine=$engine" --meta "seed=$seed" --meta "seconds=$seconds" --meta "store=$store")
for k in "${!not_run[@]}"; do meta+=(--meta "not_run.$k=${not_run[$k]}"); done
went_back=0; [ -f "$out/went-back.log" ] && went_back=$(wc -l < "$out/went-back.log")
recoveries=$(grep -c '"kind":"recovery"' "$out/h/faults.jsonl" 2>/dev/null || true)
meta+=(--meta "went_back=$went_back" --meta "recoveries=${recoveries:-0}")
rc=0
"$check" "$out/history.jsonl" --control "$out/control.jsonl" --summary "$out/summary.json" --svg "$out/timeline.svg" \
  "${meta[@]}" | tee "$out/check.txt" || rc=$?
# Redis replicates asynchronously: a failover may lose writes the master
# acknowledged (the seed's warning, docs/stores/redis.md), and what
# was handed out from them may be handed out again by the promoted replica
# before anyone can tell. Such violations pass only as that loss: a master
# fault ran, the clients that saw the lost writes were refused
# (state_went_back: coord detected it) and the recovery ran; and the
# control was caught as on every engine.
if [ "$engine" = redis-sentinel ] && [ "$rc" = 1 ] && ! grep -q 'THE CONTROL PASSED' "$out/check.txt"; then
  if ! grep -q '"kind":"master-' "$out/h/faults.jsonl"; then
    log "violations without a master fault: not the loss a failover may cause"
  elif [ "$went_back" -lt 1 ] || [ "${recoveries:-0}" -lt 1 ]; then
    log "violations, and no client saw the store go back: the loss went undetected"
  else
    log "violations by design (asynchronous replication lost acknowledged writes in a failover): detected by $went_back clients (state_went_back), recovered $recoveries times"
    rc=0
  fi
fi
[ "$finals" = 0 ] || rc=1
log "history, summary.json and timeline.svg in $out"
exit "$rc"
