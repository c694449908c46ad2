#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl elect and leader on one store, as processes: five candidates, one
# leader at a time (each leader's COMMAND takes an exclusive flock; a second
# COMMAND running at once would find it taken), the leader SIGKILLed three
# times and a new one elected each time with a larger term number, `leader`
# and `leader --watch` saying who leads; SIGTERM ends the rest cleanly. A
# candidate that lost its term (exit 3) is started again, as a supervisor would.
# Usage: coordctl_elect_test.sh COORDCTL STORE (file or sqlite: a scratch file)
set -u
ctl="$1"; store="$2"
dir=$(mktemp -d /tmp/coord-elect-XXXXXX)
pids=()
cleanup() {
  touch "$dir/stop"
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for f in "$dir"/c*.pid; do [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
err="$dir/err"
[ "$store" = file ] && store="file:$dir/state.json"
[ "$store" = sqlite ] && store="sqlite:$dir/state.db"
. "$(dirname "$0")/coordctl_lib.sh"
init_store  # a store that needs it (PostgreSQL, Redis, ZooKeeper) initialized once
name="elect-$$-$RANDOM"

expect 0 "none" -- leader --store "$store" --name "$name"
cat > "$dir/lead.sh" <<'SH'
exec 9>"$1/lock"
if ! flock -n 9; then echo "OVERLAP $COORD_FENCE_TOKEN" >> "$1/log"; exit 1; fi
echo "start $COORD_FENCE_TOKEN $COORD_LEASE_OWNER $PPID" >> "$1/log"
while :; do sleep 0.05 9>&-; done
SH
"$ctl" leader --store "$store" --name "$name" --watch > "$dir/watch" 2>"$dir/watch.err" &
watcher=$!; pids+=("$watcher")
for _ in $(seq 200); do [ -s "$dir/watch" ] && break; sleep 0.05; done   # it saw "none" before anyone campaigns
# A candidate as a supervisor runs it: started again when it ends with 3
# (it lost its term before or while its COMMAND ran: a store that stalled
# past the term, which a loaded machine sees), not when killed or stopped.
# $dir/C.pid is the running elect process.
candidate() {
  local c="$1" rc
  while :; do
    "$ctl" elect --store "$store" --name "$name" --ttl 1s --candidate "$c" --grace 1s -- bash "$dir/lead.sh" "$dir" 2>>"$dir/$c.err" &
    echo $! > "$dir/$c.pid"
    wait $!; rc=$?
    echo "exit $rc" >> "$dir/$c.err"
    [ "$rc" = 3 ] && [ ! -e "$dir/stop" ] || return 0
  done
}
sups=()
for c in c1 c2 c3 c4 c5; do
  candidate "$c" &
  sups+=("$!"); pids+=("$!")
done

# next_start T: the first COMMAND started with a term above T, "TOKEN C PID"
# (60 s at most: a liveness bound, not a timing). The store may name a
# leader whose COMMAND never runs (by etcd's and ZooKeeper's recipe the
# first place in line leads before its client has seen it, and a term can
# be lost before COMMAND starts), so the rounds follow COMMANDs that ran.
next_start() {
  local t c p
  for _ in $(seq 1200); do
    while read -r _ t c p; do
      [ "$t" -gt "$1" ] && { echo "$t $c $p"; return; }
    done < <(grep '^start' "$dir/log" 2>/dev/null)
    sleep 0.05
  done
  echo "0 none 0"
}
# watch_reaches T: leader --watch has shown a term of T or later (30 s at
# most: a liveness bound). It polls, so a term that ends at once may pass
# unseen (a candidate that lost its term, one started as the rest stop);
# a term that holds is seen, or the one after it if it was lost meanwhile.
watch_reaches() {
  local t
  for _ in $(seq 600); do
    t=$(grep -o 'token=[0-9]*$' "$dir/watch" | tail -1 | cut -d= -f2)
    [ -n "$t" ] && [ "$t" -ge "$1" ] && return 0
    sleep 0.05
  done
  return 1
}
last_token=0; tracked=()
for round in 1 2 3; do
  read -r token who pid < <(next_start "$last_token")
  [ "$token" -gt 0 ] || { fail "round $round: no COMMAND started after term $last_token"; break; }
  # While its COMMAND runs, `leader` names it (unless the term was lost meanwhile: then a later term leads).
  now=$("$ctl" leader --store "$store" --name "$name")
  if [[ "$now" =~ ^leader=(c[1-5])\ token=([0-9]+)$ ]]; then
    [ "${BASH_REMATCH[2]}" -ge "$token" ] || fail "round $round: leader says $now while term $token runs"
    [ "${BASH_REMATCH[2]}" != "$token" ] || [ "${BASH_REMATCH[1]}" = "$who" ] || fail "round $round: term $token is $who's, leader says $now"
  else
    fail "round $round: leader says '$now' while term $token runs"
  fi
  watch_reaches "$token" || fail "round $round: leader --watch did not see term $token of $who: $(cat "$dir/watch")"
  kill -KILL "$pid"   # the leader killed outright
  last_token=$token; tracked+=("$who $token")
done
read -r fourth who _ < <(next_start "$last_token")
tracked+=("$who $fourth")
[ "$fourth" -gt "$last_token" ] || fail "after the third kill: no fourth COMMAND started"
watch_reaches "$fourth" || fail "leader --watch did not see the fourth term $fourth: $(cat "$dir/watch")"

# SIGTERM to the rest: each stops cleanly (the leader: its COMMAND stopped, 143).
# (Again until every supervisor ended: one may have started its candidate again just before.)
touch "$dir/stop"
for _ in $(seq 600); do
  alive=0
  for p in "${sups[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  for c in c1 c2 c3 c4 c5; do kill -TERM "$(cat "$dir/$c.pid")" 2>/dev/null; done
  sleep 0.05
done
[ "$alive" = 0 ] || fail "a candidate did not stop on SIGTERM"
kill -TERM "$watcher"; wait "$watcher"; rc=$?
[ "$rc" = 0 ] || fail "leader --watch ends with 0 on SIGTERM: $rc ($(cat "$dir/watch.err"))"

grep -q OVERLAP "$dir/log" && fail "two leaders' COMMANDs ran at once: $(cat "$dir/log")"
starts=$(grep -c '^start' "$dir/log")
[ "$starts" -ge 4 ] || fail "four leaders in turn, got $starts: $(cat "$dir/log")"
sort -c -n -k2 <(grep '^start' "$dir/log") 2>/dev/null || fail "term numbers only grow: $(cat "$dir/log")"
[ "$(awk '{print $2}' "$dir/log" | sort -u | wc -l)" = "$starts" ] || fail "a term number twice: $(cat "$dir/log")"
# The watcher saw "none" first, then terms that only grow.
[ "$(head -1 "$dir/watch")" = none ] || fail "leader --watch starts with none: $(head -1 "$dir/watch")"
grep -o 'token=[0-9]*' "$dir/watch" | cut -d= -f2 | sort -c -n -u 2>/dev/null || fail "leader --watch: terms grow: $(cat "$dir/watch")"
for t in "${tracked[@]}"; do  # a term the rounds followed, where it shows it, with its own candidate
  set -- $t
  ! grep -q "token=$2\$" "$dir/watch" || grep -qx "leader=$1 token=$2" "$dir/watch" || fail "leader --watch names term $2 wrongly (it is $1's): $(cat "$dir/watch")"
done
expect 0 "none" -- leader --store "$store" --name "$name"

if [ "$failures" != 0 ]; then  # what each candidate said, for the failure's cause
  for c in c1 c2 c3 c4 c5; do echo "--- $c:"; cat "$dir/$c.err"; done
  echo "--- log:"; cat "$dir/log"; echo "--- watch:"; cat "$dir/watch"
fi
echo "elect on ${store%%:*}: $failures failure(s)"
[ "$failures" = 0 ]
