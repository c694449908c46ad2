#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl lease hold on one store, as processes: COMMAND runs with the lease
# in its environment while the keeper renews it over many terms (another
# process is refused all along), COMMAND's exit status is coordctl's, the
# lease is released when COMMAND exits; not granted: exit 3, COMMAND never
# started; --wait takes it once the holder's term ends; a holder stopped
# (SIGSTOP) past its term while another process takes the name finds on
# waking that it lost, stops COMMAND and exits 3; SIGTERM to coordctl stops
# COMMAND and releases; bad usage is exit 2.
# With SERVER_PID_FILE (a one-process server: Redis, one etcd member, a
# standalone ZooKeeper), also: the server
# stopped (SIGSTOP) under a holder: the holder stops COMMAND by its safe
# deadline, before the store's term ends, and the next holder, granted after
# the server resumes, is never overlapped by the old COMMAND.
# Usage: coordctl_lease_hold_test.sh COORDCTL STORE [SERVER_PID_FILE] (STORE file or sqlite: a scratch file)
# Runs on every lease store (etcd's terms as noted below).
set -u
ctl="$1"; store="$2"; server_pid_file="${3:-}"
dir=$(mktemp -d /tmp/coord-hold-XXXXXX)
trap 'rm -rf "$dir"' EXIT
err="$dir/err"
[ "$store" = file ] && store="file:$dir/state.json"
[ "$store" = sqlite ] && store="sqlite:$dir/state.db"
. "$(dirname "$0")/coordctl_lib.sh"
init_store  # a store that needs it (PostgreSQL, Redis, ZooKeeper) initialized once
run="hold-$$-$RANDOM"
# The short term of scenario 4, and how long its holder stays stopped: etcd
# counts whole seconds (2 s at least; a term of T is granted as T + 0.25 s
# rounded up), so its short term is longer.
short=500ms stopped=1.5
case "$store" in
  etcd://*) short=2s stopped=4 ;;
esac

# 1. The lease in COMMAND's environment, renewed over many terms, COMMAND's status, released after.
# COMMAND runs until the test says it may end (the file "done"), so that every
# rival below asks while it still runs.
"$ctl" lease hold --store "$store" --name "$run" --ttl 1s -- \
  bash -c 'echo "$COORD_LEASE_NAME $COORD_LEASE_OWNER $COORD_FENCE_TOKEN" > "$0"; until [ -e "$0.done" ]; do sleep 0.05; done; exit 7' "$dir/env" 2>"$err" &
pid=$!
for i in 1 2 3 4 5 6 7 8; do
  sleep 0.5
  out=$("$ctl" lease acquire --store "$store" --name "$run" --owner rival --ttl 60000); rc=$?
  [ "$rc" = 3 ] || fail "a rival at $i x 0.5 s (ttl 1 s, renewed): rc=$rc '$out'"
done
touch "$dir/env.done"
wait "$pid"; rc=$?
[ "$rc" = 7 ] || fail "lease hold exits with COMMAND's status 7: got $rc ($(cat "$err"))"
read -r name owner token < "$dir/env"
[ "$name" = "$run" ] && [[ "$owner" =~ ^[^:]+:[0-9]+:[0-9a-f]{16}$ ]] && [[ "$token" =~ ^[1-9][0-9]*$ ]] ||
  fail "COMMAND's environment: '$name' '$owner' '$token'"
out=$("$ctl" lease acquire --store "$store" --name "$run" --owner next --ttl 60000); rc=$?
[ "$rc" = 0 ] && [ "${out#token=}" -gt "$token" ] || fail "after COMMAND exited the lease is free: rc=$rc '$out'"

# 2. Not granted (next holds it for 60 s): exit 3, COMMAND never started.
"$ctl" lease hold --store "$store" --name "$run" --ttl 1s -- touch "$dir/started" 2>"$err"; rc=$?
[ "$rc" = 3 ] && [ ! -e "$dir/started" ] || fail "not granted: rc=$rc, started: $([ -e "$dir/started" ] && echo yes || echo no)"
grep -q "held by next" "$err" || fail "not granted names the holder: $(cat "$err")"
expect 0 "released" -- lease release --store "$store" --name "$run" --owner next

# 3. --wait: taken once the holder's term ends (a 1 s lease nobody renews).
"$ctl" lease acquire --store "$store" --name "$run-w2" --owner brief --ttl 1000 >/dev/null
"$ctl" lease hold --store "$store" --name "$run-w2" --ttl 1s --wait 10s -- touch "$dir/waited" 2>"$err"; rc=$?
[ "$rc" = 0 ] && [ -e "$dir/waited" ] || fail "--wait: rc=$rc ($(cat "$err"))"

# 4. The holder stopped past its term; another process takes the name; on
#    waking the holder finds it lost, stops COMMAND (SIGTERM) and exits 3.
"$ctl" lease hold --store "$store" --name "$run-p" --ttl "$short" --grace 2s -- \
  bash -c 'echo $$ > "$0"; trap "echo stopped > $0.term; exit 0" TERM; while :; do sleep 0.05; done' "$dir/child" 2>"$err" &
pid=$!
for _ in $(seq 100); do [ -s "$dir/child" ] && break; sleep 0.05; done
stop_clear "$pid" || fail "the holder could not be stopped outside a write of the store"
sleep "$stopped"
out=$("$ctl" lease acquire --store "$store" --name "$run-p" --owner taker --ttl 60000); rc=$?
[ "$rc" = 0 ] || fail "the name is free after the stopped holder's term: rc=$rc '$out'"
resume_all "$pid"
wait "$pid"; rc=$?
[ "$rc" = 3 ] || fail "a holder that lost its lease exits 3: got $rc"
grep -q "lost $run-p" "$err" || fail "the loss is said on standard error: $(cat "$err")"
[ -e "$dir/child.term" ] || fail "COMMAND got SIGTERM when the lease was lost"
kill -0 "$(cat "$dir/child")" 2>/dev/null && fail "COMMAND still runs after the loss"
out=$("$ctl" lease acquire --store "$store" --name "$run-p" --owner third --ttl 1000); rc=$?
[ "$rc" = 3 ] && [ "$out" = "held by taker" ] || fail "the new holder's lease stays: rc=$rc '$out'"

# 5. SIGTERM to coordctl: COMMAND stopped, the lease released, exit 143.
"$ctl" lease hold --store "$store" --name "$run-t" --ttl 5s -- \
  bash -c 'echo $$ > "$0"; while :; do sleep 0.05; done' "$dir/child2" 2>"$err" &
pid=$!
for _ in $(seq 100); do [ -s "$dir/child2" ] && break; sleep 0.05; done
kill -TERM "$pid"
wait "$pid"; rc=$?
[ "$rc" = 143 ] || fail "SIGTERM to lease hold: rc=$rc ($(cat "$err"))"
kill -0 "$(cat "$dir/child2")" 2>/dev/null && fail "COMMAND still runs after SIGTERM"
out=$("$ctl" lease acquire --store "$store" --name "$run-t" --owner after --ttl 1000); rc=$?
[ "$rc" = 0 ] || fail "the lease was released on SIGTERM: rc=$rc '$out'"

# 6. The server stopped under the holder (a one-process server only).
if [ -n "$server_pid_file" ]; then
  server=$(cat "$server_pid_file") && kill -0 "$server" || fail "no live server named by $server_pid_file"
  "$ctl" lease hold --store "$store" --name "$run-s" --ttl 1s --grace 1s --timeout 5s -- \
    bash -c 'echo $$ > "$0"; trap "exit 0" TERM; while :; do sleep 0.02; done' "$dir/child3" 2>"$err" &
  pid=$!
  for _ in $(seq 100); do [ -s "$dir/child3" ] && break; sleep 0.05; done
  kill -STOP "$server"
  wait "$pid"; rc=$?   # the safe deadline passes while the server is stopped
  kill -0 "$(cat "$dir/child3")" 2>/dev/null && fail "COMMAND still runs after its holder lost the lease"
  kill -CONT "$server"
  [ "$rc" = 3 ] || fail "a holder whose server stopped exits 3: got $rc ($(cat "$err"))"
  grep -q "lost $run-s" "$err" || fail "the loss is said on standard error: $(cat "$err")"
  for _ in $(seq 200); do
    out=$("$ctl" lease acquire --store "$store" --name "$run-s" --owner next --ttl 60000) && break
    sleep 0.05
  done
  [[ "$out" =~ ^token= ]] || fail "the next holder is granted after the server resumes: '$out'"
fi

# 7. Bad usage: exit 2, nothing started.
expect 2 "" -- lease hold --store "$store" --name "$run-u" --ttl 1s
expect 2 "" -- lease hold --store "$store" --name "$run-u" --ttl 50ms -- touch "$dir/bad"
expect 2 "" -- lease hold --store "$store" --name "$run-u" --ttl 1s --grace soon -- touch "$dir/bad"
[ ! -e "$dir/bad" ] || fail "a usage error started COMMAND"

echo "lease hold on ${store%%:*}: $failures failure(s)"
[ "$failures" = 0 ]
