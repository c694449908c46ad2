#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl elect and leader on one store, as processes: five candidates, one
# leader at a time (each leader's COMMAND takes an exclusive flock; a second
# COMMAND running at once would find it taken), the leader SIGKILLed three
# times and a new one elected each time with a larger term number, `leader`
# and `leader --watch` saying who leads; SIGTERM ends the rest cleanly.
# Usage: coordctl_elect_test.sh COORDCTL STORE (file or sqlite: a scratch file)
set -u
ctl="$1"; store="$2"
dir=$(mktemp -d /tmp/coord-elect-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$dir"; }
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
echo "start $COORD_FENCE_TOKEN $COORD_LEASE_OWNER" >> "$1/log"
while :; do sleep 0.05 9>&-; done
SH
"$ctl" leader --store "$store" --name "$name" --watch > "$dir/watch" 2>"$dir/watch.err" &
watcher=$!; pids+=("$watcher")
for _ in $(seq 200); do [ -s "$dir/watch" ] && break; sleep 0.05; done   # it saw "none" before anyone campaigns
declare -A pid_of
for c in c1 c2 c3 c4 c5; do
  "$ctl" elect --store "$store" --name "$name" --ttl 1s --candidate "$c" --grace 1s -- bash "$dir/lead.sh" "$dir" 2>"$dir/$c.err" &
  pid_of[$c]=$!; pids+=("$!")
done

# leader_now: "leader=C token=T" once someone leads (30 s at most: a liveness bound, not a timing).
leader_now() {
  local out
  for _ in $(seq 600); do
    out=$("$ctl" leader --store "$store" --name "$name")
    [ "$out" != none ] && [ "$out" != "$1" ] && { echo "$out"; return; }
    sleep 0.05
  done
  echo "none"
}
last=""; last_token=0
for round in 1 2 3; do
  now=$(leader_now "$last")
  [[ "$now" =~ ^leader=(c[1-5])\ token=([0-9]+)$ ]] || { fail "round $round: nobody leads ($now)"; break; }
  who=${BASH_REMATCH[1]}; token=${BASH_REMATCH[2]}
  [ "$token" -gt "$last_token" ] || fail "round $round: term $token is not above $last_token"
  # Its COMMAND runs (the leader's log line), then the leader is killed outright.
  for _ in $(seq 200); do grep -q "start $token " "$dir/log" 2>/dev/null && break; sleep 0.05; done
  grep -q "start $token " "$dir/log" || fail "round $round: the leader's COMMAND did not start"
  kill -KILL "${pid_of[$who]}"
  last="$now"; last_token=$token
done
now=$(leader_now "$last")
fourth=0; [[ "$now" =~ token=([0-9]+)$ ]] && fourth=${BASH_REMATCH[1]}
[ "$fourth" -gt "$last_token" ] || fail "after the third kill: $now"
for _ in $(seq 200); do [ "$(grep -c '^start' "$dir/log")" -ge 4 ] && break; sleep 0.05; done
# The watcher has seen the fourth leader too before everyone stops.
for _ in $(seq 200); do grep -q "token=$fourth\$" "$dir/watch" && break; sleep 0.05; done

# SIGTERM to the rest: each stops cleanly (the leader: its COMMAND stopped, 143).
for c in c1 c2 c3 c4 c5; do kill -TERM "${pid_of[$c]}" 2>/dev/null; done
for c in c1 c2 c3 c4 c5; do wait "${pid_of[$c]}" 2>/dev/null; done
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
[ "$(grep -c '^leader=' "$dir/watch")" -ge 4 ] || fail "leader --watch saw every leader: $(cat "$dir/watch")"
expect 0 "none" -- leader --store "$store" --name "$name"

echo "elect on ${store%%:*}: $failures failure(s)"
[ "$failures" = 0 ]
