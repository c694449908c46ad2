#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cron runner across processes on one store (file, SQLite, PostgreSQL,
# Redis, ZooKeeper): two jobs on a two-second schedule for 20 seconds, each run by
# three `coordctl cron run` processes at once.
# - Job A, undisturbed: every slot between the first and the last ran
#   exactly once (on the embedded stores, on a store of its own: below).
#   Overlap allowed: a run whose end a loaded machine records late (its
#   runner not scheduled for a second) must not make the next slot a skip;
#   the skip policy has its own test (coordctl_cron_policies).
# - Job B (overlap allowed), whose command writes its effect to a fenced key
#   under COORD_FENCE after a second: one runner is SIGKILLed mid-command
#   (with its command: a machine that died), another SIGSTOPped with every
#   command it runs past its lease (a paused machine), the held command
#   resumed first (it writes late), then the runner. Every slot ran, each
#   slot's effect was accepted exactly once (twice, under a larger fence the
#   second time, only for a slot whose command announced its write before
#   the kill or the stop: at least once), and the stopped runner's late
#   write was refused.
# `coordctl cron status` shows every slot done.
#
#   coordctl_cron_test.sh COORDCTL STORE   (STORE: file, sqlite, postgres:CONNINFO, redis://HOST:PORT/DB or zookeeper://HOST:PORT)
set -u
ctl="$1"
store="$2"
work=$(mktemp -d /tmp/coordctl_cron.XXXXXX)
err="$work/stderr"
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
# "file" and "sqlite": fresh stores of that kind, one per job. An embedded
# store has one write lock for all its keys, and job B's runner or command is
# stopped in this test: stopped inside a write, it holds every other writer up
# (job A's claims lapse and run again, as they must), so job A, the
# undisturbed one, gets a store of its own. On the servers a stopped client
# holds nobody else's keys.
store_a=""
case "$store" in
  file) store="file:$work/store"; store_a="file:$work/store-a" ;;
  sqlite) store="sqlite:$work/store.db"; store_a="sqlite:$work/store-a.db" ;;
esac

id="$(date +%s%N | tail -c 9)$$"
case "$store" in zookeeper://*) store="$store/cron$id" ;; esac  # a root of this run's own
init_store  # postgres, redis: once (refused when done already: fine); zookeeper: this run's root
job_a="cronA$id"
job_b="cronB$id"
[ -n "$store_a" ] || store_a="$store"
common=(--cron "*/2 * * * * *" --tz UTC --catch-up 10s --lease-ttl 1500 --for 20s --stop-grace 5s)

cat > "$work/job_b.sh" <<EOF
#!/usr/bin/env bash
# Job B: a second's work, then the effect, written under the slot's fence
# (announced first: the test's kill may land after it). The first command to
# start after the test made its hold file takes it (one rename: one taker)
# and writes only once the test made its release file: the test stops it, and
# its runner, in between, however late this script and the machine run.
if mv "$work/hold" "$work/held.\$\$" 2>/dev/null; then
  echo "\$COORD_SLOT \$COORD_FENCE \$\$" > "$work/held.\$\$" && mv "$work/held.\$\$" "$work/held"
  for _ in \$(seq 1 600); do [ -e "$work/release" ] && break; sleep 0.05; done
else
  sleep 1
fi
echo "\$COORD_SLOT \$COORD_FENCE" >> "$work/writing"
if out=\$("$ctl" fence write --store "$store" --key "effect/\$COORD_SLOT" --token "\$COORD_FENCE" --value "\$COORD_ATTEMPT" 2>&1); then
  echo "accepted \$COORD_SLOT \$COORD_FENCE" >> "$work/effects"
else
  echo "refused \$COORD_SLOT \$COORD_FENCE \$out" >> "$work/effects"
fi
EOF
chmod +x "$work/job_b.sh"

pids_a=() pids_b=()
claiming_until=$(( $(date +%s) + 20 ))  # the runners claim for 20 s from about now
for i in 1 2 3; do
  "$ctl" cron run --store "$store_a" "${common[@]}" --job "$job_a" --worker "A$i" --overlap allow -- \
    sh -c 'echo "$COORD_SLOT $COORD_FENCE $COORD_ATTEMPT $COORD_SCHEDULED_AT" >> "$0"; sleep 0.3' "$work/runs_a" \
    2> "$work/a$i.log" &
  pids_a+=($!)
  "$ctl" cron run --store "$store" "${common[@]}" --job "$job_b" --worker "B$i" --overlap allow -- "$work/job_b.sh" 2> "$work/b$i.log" &
  pids_b+=($!)
done

# next_start I...: waits (10 s at most) for the next command one of runners
# B<I>... starts; prints "I PID SLOT FENCE" (the runner, the command's
# process group, the slot and its fence).
next_start() {
  local i t line
  declare -A seen
  for i in "$@"; do seen[$i]=$(grep -c ' started ' "$work/b$i.log"); done
  for t in $(seq 1 200); do
    for i in "$@"; do
      line=$(grep ' started ' "$work/b$i.log" | tail -n +"$(( ${seen[$i]} + 1 ))" | head -1)
      if [ -n "$line" ]; then
        echo "$i $(echo "${line##*pid=}" | cut -d' ' -f1) $(echo "${line##*slot=}" | cut -d' ' -f1) $(echo "${line##*fence=}" | cut -d' ' -f1)"
        return 0
      fi
    done
    sleep 0.05
  done
  return 1
}

# At about 5 s: the next runner to start a command dies with its command mid-way.
sleep 4
read -r killed job killed_slot killed_fence < <(next_start 1 2 3) || fail "no runner of job B started a command"
kill -KILL "${pids_b[$((killed - 1))]}"; kill -KILL -- "-$job" 2>/dev/null
echo "killed B$killed and its command (pid $job)"
# On a loaded machine the kill may land after the command announced its
# write (this script saw the start late): its effect may then be in, and the
# slot, never marked done, runs again under a larger fence (at least once,
# as the README says): its second acceptance is no duplicate.
rerun_slots=""
grep -qx "$killed_slot $killed_fence" "$work/writing" 2>/dev/null && rerun_slots=$killed_slot
# At about 10 s: the next of the others to start a command is stopped with it
# for 3.5 s (the lease is 1.5 s) and until another runner has taken its slot
# over.
sleep 4
others=()
for i in 1 2 3; do [ "$i" != "$killed" ] && others+=("$i"); done
# The runner is stopped with every command it runs (a paused machine), and
# never inside a write of an embedded store (coordctl_lib.sh's stop_clear):
# with --overlap allow and a slow command, an earlier slot's command may
# still run beside the held one.
# The next command to start is held before its write (job_b.sh), so the
# stop lands before it however late this script sees the start: its runner
# is the one whose log shows that slot and fence started.
stopped=""
: > "$work/hold"
for _ in $(seq 1 200); do [ -e "$work/held" ] && break; sleep 0.05; done
if read -r slot fence job < "$work/held" 2>/dev/null; then
  for _ in $(seq 1 200); do
    for i in "${others[@]}"; do
      grep -q " started slot=$slot fence=$fence attempt=[0-9]* pid=$job\$" "$work/b$i.log" && stopped=$i
    done
    [ -n "$stopped" ] && break
    sleep 0.05
  done
fi
if [ -z "$stopped" ] || ! stop_clear "${pids_b[$((stopped - 1))]}" "$job"; then
  fail "no command of job B was held and stopped with its runner (held: $(cat "$work/held" 2>/dev/null))"
  for l in "$work"/b*.log; do echo "--- $l"; cat "$l"; done
  exit 1
fi
# The slots the stopped runner had started and not finished. One whose
# command announced its write before the stop (a slow earlier slot beside
# the held one) may have its effect in: never marked done, it runs again
# under a larger fence (at least once), and its second acceptance is no
# duplicate.
in_flight=$(awk '$4 == "started" { split($5, s, "="); split($6, f, "="); run[s[2]] = f[2] }
                 $4 == "finished" { split($5, s, "="); delete run[s[2]] }
                 END { for (k in run) print k, run[k] }' "$work/b$stopped.log")
while read -r s f; do
  [ -n "$s" ] && [ "$s" != "$slot" ] && grep -qx "$s $f" "$work/writing" 2>/dev/null && rerun_slots="$rerun_slots $s"
done <<< "$in_flight"
: > "$work/release"  # read by the command when it is resumed: it then writes, late
echo "stopped B$stopped and its command (pid $job; stops taken: $stop_tries)"
sleep 3.5
# Another runner takes the slot over (its lease lapsed) and its command
# writes the slot's effect under a larger fence: waited for, however loaded
# the machine is (20 s at most).
# So is every other slot the stopped runner had started and not finished
# (its commands stopped with it): resumed before that, such a command's
# write would land first, and the slot, never marked done, ran again.
taken_over() { awk -v s="$1" -v f="$2" '$1 == "accepted" && $2 == s && $3 > f { found = 1 } END { exit !found }' "$work/effects" 2>/dev/null; }
for _ in $(seq 1 400); do
  all=1
  while read -r s f; do [ -n "$s" ] && ! taken_over "$s" "$f" && all=0; done <<< "$in_flight"
  [ "$all" = 1 ] && break
  sleep 0.05
done
# The held command wakes first (its runner is still paused) and writes late,
# under its old fence; then the runner wakes with its other commands and
# learns it lost the slots.
kill -CONT -- "-$job" 2>/dev/null
sleep 1.5
resume_all "${pids_b[$((stopped - 1))]}"
echo "resumed B$stopped"

for i in 1 2 3; do
  wait "${pids_a[$((i - 1))]}" || fail "runner A$i exited with $?"
  [ "$i" = "$killed" ] || wait "${pids_b[$((i - 1))]}" || fail "runner B$i exited with $?"
done

# lost_at_the_end JOB T LOG...: a runner logged that it lost its claim of
# JOB's slot at T (its heartbeat not answered by the claim's safe deadline on
# a loaded machine), and T is in the runners' last 5 s of claiming: the slot
# runs again only once the lost claim lapsed (1.5 s after its last
# heartbeat), by a runner still claiming then, so its run may be lost with
# the end of the test. Earlier, another runner must run it again.
lost_at_the_end() {
  local job="$1" t="$2"; shift 2
  [ "$t" -ge $((claiming_until - 5)) ] &&
    grep -q "coordctl cron: lost slot=$job@$(date -u -d "@$t" +%Y-%m-%dT%H:%M:%SZ) " "$@"
}
# check_every_slot WHAT JOB SLOTS LOG...: the SLOTS (one a line) from the
# first to the last, two seconds apart: none missing (unless lost at the end).
check_every_slot() {
  local what="$1" job="$2" slots="$3" first last t n
  shift 3
  n=$(echo "$slots" | grep -c .)
  [ "$n" -ge 8 ] || { fail "$what: only $n slots ran in 20 s: $slots"; return; }
  first=$(echo "$slots" | head -1 | sed 's/.*@//; s/Z$//')
  last=$(echo "$slots" | tail -1 | sed 's/.*@//; s/Z$//')
  t=$(date -u -d "$first" +%s)
  while [ "$t" -le "$(date -u -d "$last" +%s)" ]; do
    if ! echo "$slots" | grep -qx "[^@]*@$(date -u -d "@$t" +%Y-%m-%dT%H:%M:%SZ)"; then
      if lost_at_the_end "$job" "$t" "$@"; then
        echo "$what: the slot at $(date -u -d "@$t" +%T) was lost by its runner in the last seconds: not run again"
      else
        fail "$what: slot at $(date -u -d "@$t" +%T) did not run"
      fi
    fi
    t=$((t + 2))
  done
}

# Job A: each slot once, unless a runner lost its claim while its command
# ran (its heartbeat not answered within the 1.5 s claim on a loaded
# machine: CI saw one): then the runner says so and stops its command, and
# the slot runs again, as the runner promises. A second run no runner
# reported is two runners holding one slot.
slots_a=$(cut -d' ' -f1 "$work/runs_a" | sort)
for dup in $(echo "$slots_a" | uniq -d); do
  lost=$(cat "$work"/a[123].log | grep -c "coordctl cron: lost slot=$dup ")
  [ "$lost" -gt 0 ] || fail "job A: slot $dup ran twice, and no runner lost its claim"
  [ "$(echo "$slots_a" | grep -cx -- "$dup")" -le $((lost + 1)) ] ||
    fail "job A: slot $dup ran more often than once plus once per claim a runner lost"
done
check_every_slot "job A" "$job_a" "$(echo "$slots_a" | uniq)" "$work"/a[123].log
grep -q " 1 1 " "$work/runs_a" || fail "job A: no first attempt with fence 1: $(head -3 "$work/runs_a")"
awk '{ sub(/.*@/, "", $1); if (substr($4, 1, 19) != substr($1, 1, 19)) exit 1 }' "$work/runs_a" \
  || fail "job A: COORD_SCHEDULED_AT is not the slot's time: $(head -3 "$work/runs_a")"

# Job B: each slot's effect accepted once; the late write refused.
accepted=$(grep '^accepted' "$work/effects" | cut -d' ' -f2 | sort)
dups=$(echo "$accepted" | uniq -d | grep -vxF -f <(printf '%s\n' none $rerun_slots))
[ -z "$dups" ] || fail "job B: effects accepted twice: $dups"
for rerun_slot in $rerun_slots; do
  echo "the kill or the stop landed after a command of B announced its write: $rerun_slot may run twice"
  awk -v s="$rerun_slot" '$1 == "accepted" && $2 == s { if (seen && $3 <= last) bad = 1; seen = 1; last = $3 } END { exit bad }' "$work/effects" \
    || fail "job B: the re-run of $rerun_slot was not under a larger fence: $(cat "$work/effects")"
done
check_every_slot "job B" "$job_b" "$(echo "$accepted" | uniq)" "$work"/b[123].log
grep -q '^refused .* stale fence' "$work/effects" || fail "job B: the stopped runner's late write was not refused: $(cat "$work/effects")"
grep -q ' lost .*not recorded' "$work/b$stopped.log" || fail "runner B$stopped did not log that it lost its slot: $(cat "$work/b$stopped.log")"

# The books: status shows the slots done, with worker, attempt and exit 0.
status=$("$ctl" cron status --store "$store_a" --job "$job_a" -n 60); rc=$?
[ "$rc" = 0 ] || fail "cron status: rc=$rc"
[ "$(echo "$status" | head -1 | awk '{print $1, $2, $3, $4, $5}')" = "SLOT STATE WORKER ATTEMPT EXIT" ] || fail "status header: $status"
[ "$(echo "$status" | awk 'NR > 1 && $2 == "done" && $3 ~ /^A[123]$/ && $4 == 1 && $5 == 0' | wc -l)" -ge 8 ] \
  || fail "job A's status does not show its slots done"
status_b=$("$ctl" cron status --store "$store" --job "$job_b" -n 60)
not_done=$(echo "$status_b" | awk 'NR > 1 && !/^#/ && $2 != "done" && $2 != "none" { print $1 }')
for s in $not_done; do
  lost_at_the_end "$job_b" "$(date -u -d "${s#*@}" +%s)" "$work"/b[123].log ||
    fail "job B has a slot not done: $(echo "$status_b" | grep -F -- "$s")"
done
expect 3 "refused: no cron runner has run this job on this store" -- cron status --store "$store" --job "never$id"

if [ "$failures" -gt 0 ]; then
  # The books without the slots before the job began, then job A's logs,
  # job B's and its effects: the end of the output is what a CI excerpt keeps.
  echo "--- job A's slots"; echo "$status" | awk 'NR == 1 || $2 != "none"'
  echo "--- job B's slots"; echo "$status_b" | awk 'NR == 1 || $2 != "none"'
  for l in "$work"/a*.log "$work"/b*.log; do echo "--- $l"; cat "$l"; done
  echo "--- effects"; cat "$work/effects"
  echo "$failures failure(s)"; exit 1
fi
echo "coordctl cron on $store: ok"
