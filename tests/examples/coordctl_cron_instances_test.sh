#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cron runner's instances and schedules as processes on one store (a
# one-second schedule):
# - two `coordctl cron run` given one --worker (a copied unit file): each slot
#   still runs once at a time, and every run has its own fence token (the
#   second instance never takes the first one's claim for its own);
# - a runner with another --cron for a job is refused (exit 2, saying what
#   the store runs); one with --take-over-from now takes the job over, the
#   old runner is then refused (exit 2), and `cron status` names the schedule
#   of each slot;
# - catch-up with --overlap allow after downtime starts at most --max-running
#   jobs at once; the slots it held back past their window are recorded
#   missed with that reason.
#
#   coordctl_cron_instances_test.sh COORDCTL STORE   (STORE: file, or a server's store spec)
set -u
ctl="$1"
store="$2"
work=$(mktemp -d /tmp/coordctl_cron_instances.XXXXXX)
err="$work/stderr"
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
case "$store" in file) store="file:$work/store" ;; esac
id="$(date +%s%N | tail -c 9)$$"
case "$store" in zookeeper://*) store="$store/croni$id" ;; esac
init_store  # postgres, redis: once (refused when done already: fine); zookeeper: this run's root
every=(--store "$store" --cron "* * * * * *" --tz UTC --lease-ttl 1500)

# --- one worker name, two instances ------------------------------------------
# Each run writes "start SLOT FENCE" and, 1.2 s later, "end SLOT FENCE".
cat > "$work/run.sh" <<'EOF'
#!/usr/bin/env bash
echo "start $COORD_SLOT $COORD_FENCE $(date +%s%N)" >> "$1"
sleep 1.2
echo "end $COORD_SLOT $COORD_FENCE $(date +%s%N)" >> "$1"
EOF
chmod +x "$work/run.sh"
for i in 1 2; do
  "$ctl" cron run "${every[@]}" --job "same$id" --worker same --overlap allow --for 8s -- "$work/run.sh" "$work/same_runs" \
    2> "$work/same$i.log" &
done
wait
starts=$(grep -c '^start' "$work/same_runs")
[ "$starts" -ge 5 ] || fail "shared worker: only $starts runs in 8 s"
dups=$(grep '^start' "$work/same_runs" | cut -d' ' -f2 | sort | uniq -d)
[ -z "$dups" ] || fail "shared worker: slots started twice: $dups ($(cat "$work/same_runs"))"
fences=$(grep '^start' "$work/same_runs" | cut -d' ' -f2,3 | sort | uniq -d)
[ -z "$fences" ] || fail "shared worker: one fence for two runs: $fences"
status=$("$ctl" cron status --store "$store" --job "same$id" -n 20)
# The books name the worker and, apart, the instance that ran each slot.
echo "$status" | awk 'NR > 1 && $2 == "done" && $3 == "same" && length($9) == 16 && $9 ~ /^[0-9a-f]+$/' | grep -q . \
  || fail "shared worker: status does not show the worker and its instance: $status"

# --- a changed schedule -------------------------------------------------------
job="sched$id"
"$ctl" cron run "${every[@]}" --job "$job" --for 12s -- true 2> "$work/old.log" &
old=$!
for t in $(seq 1 100); do grep -q ' started ' "$work/old.log" && break; sleep 0.1; done
"$ctl" cron run --store "$store" --cron "*/2 * * * * *" --tz UTC --job "$job" --for 5s -- true 2> "$work/new.log"; rc=$?
[ "$rc" = 2 ] || fail "a changed schedule: exit $rc, not 2: $(cat "$work/new.log")"
grep -q 'refused: job .* runs schedule .*cron "\* \* \* \* \* \*" tz UTC.*this runner.s is .*\*/2' "$work/new.log" \
  || fail "a changed schedule: the refusal does not say what runs: $(cat "$work/new.log")"
grep -q ' started ' "$work/new.log" && fail "a refused runner started a job: $(cat "$work/new.log")"
"$ctl" cron run --store "$store" --cron "*/2 * * * * *" --tz UTC --job "$job" --take-over-from now --for 6s \
  -- true 2> "$work/takeover.log" &
takeover=$!
wait "$old"; rc=$?
[ "$rc" = 2 ] || fail "the old runner after a take-over: exit $rc, not 2: $(tail -3 "$work/old.log")"
grep -q 'refused: job .* was taken over by schedule' "$work/old.log" || fail "the old runner's refusal: $(tail -3 "$work/old.log")"
wait "$takeover" || fail "the take-over runner exited $?: $(cat "$work/takeover.log")"
grep -q ' took-over ' "$work/takeover.log" || fail "no take-over logged: $(cat "$work/takeover.log")"
status=$("$ctl" cron status --store "$store" --job "$job" -n 40)
echo "$status"
versions=$(echo "$status" | awk 'NR > 1 && $2 == "done" {print $8}' | sort -u | grep -c .)
[ "$versions" = 2 ] || fail "status does not show slots of both schedules: $status"
echo "$status" | grep -q '^# schedule v[0-9]*: cron "\* \* \* \* \* \*" tz UTC' || fail "status lacks the old schedule: $status"
echo "$status" | grep -q '^# schedule v[0-9]*: cron "\*/2 \* \* \* \* \*" tz UTC, from ' || fail "status lacks the new schedule: $status"
# Every slot between the first run and the last ran (of the schedule that
# covered it): none left without a record, none missed.
between=$(echo "$status" | awk 'NR > 1 && $1 !~ /^#/' \
  | awk '$2 == "done" { if (seen) { printf "%s", gap }; gap = ""; seen = 1; next } seen { gap = gap $1 " " $2 "\n" }')
[ -z "$between" ] || fail "slots not done across the take-over: $between $status"

# --- a cap on running jobs during catch-up -----------------------------------
job="cap$id"
"$ctl" cron run "${every[@]}" --job "$job" --for 1s -- true 2> "$work/cap0.log"
sleep 8
cat > "$work/busy.sh" <<'EOF'
#!/usr/bin/env bash
# Counts the jobs running at once: each run leaves its PID in DIR, counts
# the PIDs there still alive (itself among them) under a lock, and keeps the
# highest count seen. A run the runner stopped (SIGTERM to its group, its
# claim lost on a loaded machine) may die at any instant, its file left
# behind: its PID is no longer alive, so it is no longer counted (a counter
# it had to decrease itself stayed too high when the signal came before
# its trap was set: CI saw 3).
dir="$1"
mkdir -p "$dir"
: > "$dir/$$"
exec 9>> "$dir.lock"; flock 9
n=0
for f in "$dir"/*; do kill -0 "${f##*/}" 2>/dev/null && n=$((n + 1)); done
[ "$n" -gt "$(cat "$dir.max" 2>/dev/null || echo 0)" ] && echo "$n" > "$dir.max"
flock -u 9; exec 9>&-
sleep 4
rm -f "$dir/$$"
EOF
chmod +x "$work/busy.sh"
"$ctl" cron run "${every[@]}" --job "$job" --catch-up 6s --overlap allow --max-running 2 --for 9s \
  -- "$work/busy.sh" "$work/running" 2> "$work/cap.log"; rc=$?
[ "$rc" = 0 ] || fail "max running: exit $rc: $(cat "$work/cap.log")"
max=$(cat "$work/running.max" 2>/dev/null || echo 0)
[ "$max" = 2 ] || fail "max running: $max jobs ran at once, not 2: $(cat "$work/cap.log")"
status=$("$ctl" cron status --store "$store" --job "$job" -n 30)
echo "$status" | awk 'NR > 1 && $2 == "missed"' | grep -q 'held back: this instance ran 2 jobs (max running)' \
  || fail "max running: no slot recorded missed for the cap: $status"
expect 2 "" -- cron run "${every[@]}" --job "$job" --max-running 0 -- true

if [ "$failures" -gt 0 ]; then
  for l in "$work"/*.log; do echo "--- $l"; cat "$l"; done
  echo "$failures failure(s)"; exit 1
fi
echo "coordctl cron instances on $store: ok"
