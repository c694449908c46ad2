#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cron runner's policies as processes on a file store, one job each, run
# side by side (a one-second schedule):
# - catch-up after downtime: the slots missed within --catch-up run once
#   each, oldest first; older ones are recorded missed;
# - --overlap forbid (skipped slots), replace (the running command stopped,
#   its slot recorded replaced), allow (runs side by side);
# - SIGTERM with a command running: no new claims, the command finishes and
#   is recorded done, exit 0; with a grace shorter than the command, it is
#   stopped and its attempt recorded failed;
# - a command that cannot be run, and bad options.
#
#   coordctl_cron_policies_test.sh COORDCTL
set -u
ctl="$1"
work=$(mktemp -d /tmp/coordctl_cron_policies.XXXXXX)
err="$work/stderr"
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
store="file:$work/store"
every=(--store "$store" --cron "* * * * * *" --tz UTC --lease-ttl 1500)

# state_of JOB STATE: how many of the job's last 30 slots are in STATE.
count_state() { "$ctl" cron status --store "$store" --job "$1" -n 30 | awk -v s="$2" 'NR > 1 && $2 == s' | wc -l; }

# --- catch-up: 2 s of runs, 9 s down, then --catch-up 6s -----------------
(
  "$ctl" cron run "${every[@]}" --job catchup --for 2s -- sh -c 'echo "$COORD_SLOT" >> "$0"' "$work/catchup_runs" 2> "$work/catchup1.log"
  before=$(wc -l < "$work/catchup_runs")
  sleep 9
  "$ctl" cron run "${every[@]}" --job catchup --catch-up 6s --overlap allow --for 2s -- \
    sh -c 'echo "$COORD_SLOT" >> "$0"' "$work/catchup_runs" 2> "$work/catchup2.log"
  echo "$before" > "$work/catchup_before"
) &
catchup=$!

# --- forbid: each run takes 2.5 s; the slots due meanwhile are skipped ------
"$ctl" cron run "${every[@]}" --job forbid --overlap forbid --for 5s -- sleep 2.5 2> "$work/forbid.log" &
forbid=$!
# --- replace: each run would take 30 s; every new slot replaces it ----------
"$ctl" cron run "${every[@]}" --job replace --overlap replace --for 4s --stop-grace 1s -- \
  sh -c 'trap "echo \$COORD_SLOT >> $0; exit 143" TERM; sleep 30 & wait' "$work/replaced" 2> "$work/replace.log" &
replace=$!
# --- allow: runs of 2.5 s side by side ---------------------------------------
"$ctl" cron run "${every[@]}" --job allow --overlap allow --for 4s -- sleep 2.5 2> "$work/allow.log" &
allow=$!

# --- SIGTERM with a command running (2 s, the grace 5 s): it finishes --------
"$ctl" cron run "${every[@]}" --job term --stop-grace 5s -- sh -c 'sleep 2; echo finished >> "$0"' "$work/term_out" \
  2> "$work/term.log" &
term=$!
for t in $(seq 1 50); do grep -q ' started ' "$work/term.log" && break; sleep 0.1; done
kill -TERM "$term"
wait "$term"; rc=$?
[ "$rc" = 0 ] || fail "SIGTERM: the runner exited $rc"
[ "$(cat "$work/term_out" 2>/dev/null)" = finished ] || fail "SIGTERM: the running command did not finish"
[ "$(grep -c ' started ' "$work/term.log")" = 1 ] || fail "SIGTERM: claims after the signal: $(cat "$work/term.log")"
[ "$(count_state term done)" = 1 ] || fail "SIGTERM: the finished command is not recorded done"

# --- SIGTERM, the grace (300 ms) shorter than the command: stopped, failed ----
"$ctl" cron run "${every[@]}" --job term2 --stop-grace 300ms -- sleep 20 2> "$work/term2.log" &
term2=$!
for t in $(seq 1 50); do grep -q ' started ' "$work/term2.log" && break; sleep 0.1; done
kill -INT "$term2"
wait "$term2"; rc=$?
[ "$rc" = 0 ] || fail "SIGINT: the runner exited $rc"
grep -q ' stopping ' "$work/term2.log" || fail "SIGINT: no stopping line: $(cat "$work/term2.log")"
[ "$(count_state term2 failed)" = 1 ] || fail "SIGINT: the stopped command is not recorded failed"
"$ctl" cron status --store "$store" --job term2 -n 30 | grep -q 'stopped: the runner shut down (signal 15)' \
  || fail "SIGINT: the failure does not say why: $("$ctl" cron status --store "$store" --job term2 -n 3)"

# --- a command that cannot be run: failed, saying why -----------------------
"$ctl" cron run "${every[@]}" --job nocmd --max-attempts 1 --for 1500ms -- /nonexistent/job 2> "$work/nocmd.log"
"$ctl" cron status --store "$store" --job nocmd -n 5 | grep -q 'failed .*cannot run /nonexistent/job: No such file' \
  || fail "a command that cannot run: $("$ctl" cron status --store "$store" --job nocmd -n 5)"

# --- bad options: usage errors (2), nothing started --------------------------
expect 2 "" -- cron run "${every[@]}" --job bad --overlap sometimes -- true
expect 2 "" -- cron run "${every[@]}" --job bad --catch-up 5 -- true
expect 2 "" -- cron run "${every[@]}" --job bad --lease-ttl 10 -- true
expect 2 "" -- cron run --store "$store" --job bad --cron "61 * * * *" --tz UTC -- true
expect 2 "" -- cron run --store "$store" --job bad --cron "* * * * *" --tz Mars/Olympus -- true
expect 2 "" -- cron run "${every[@]}" --job bad
expect 2 "" -- cron run "${every[@]}" --job "bad job" -- true
expect 2 "" -- cron status --store "$store" --job forbid -n 0

wait "$forbid" "$replace" "$allow" || fail "a policy runner failed"
# forbid: never two at once: each started after the previous finished, the rest skipped.
[ "$(count_state forbid skipped)" -ge 2 ] || fail "forbid: no skipped slots: $("$ctl" cron status --store "$store" --job forbid -n 8)"
[ "$(count_state forbid done)" -ge 1 ] || fail "forbid: no run done"
# replace: the replaced commands were stopped (SIGTERM) and their slots say so.
[ "$(count_state replace replaced)" -ge 2 ] || fail "replace: $("$ctl" cron status --store "$store" --job replace -n 8)"
[ "$(wc -l < "$work/replaced")" -ge 2 ] || fail "replace: the replaced commands were not stopped"
grep -q ' lost .*claim lost' "$work/replace.log" || fail "replace: no lost line: $(cat "$work/replace.log")"
# allow: runs overlapped, none skipped.
[ "$(count_state allow done)" -ge 3 ] && [ "$(count_state allow skipped)" = 0 ] \
  || fail "allow: $("$ctl" cron status --store "$store" --job allow -n 8)"

wait "$catchup"
before=$(cat "$work/catchup_before")
late=$(tail -n +"$((before + 1))" "$work/catchup_runs")
missed=$(count_state catchup missed)
[ "$missed" -ge 2 ] || fail "catch-up: older slots not recorded missed ($missed): $("$ctl" cron status --store "$store" --job catchup -n 16)"
# The catch-up runs: oldest first, each once, none older than the window.
[ "$(echo "$late" | sort | uniq -d)" = "" ] || fail "catch-up: a slot ran twice: $late"
# Under --overlap allow the commands run side by side, so the order they
# append in is not the order they were started: the runner's log says that.
started=$(sed -n 's/.* started slot=\([^ ]*\) .*/\1/p' "$work/catchup2.log" | head -6)
[ "$started" = "$(echo "$started" | sort)" ] || fail "catch-up: not started oldest first: $started"
[ "$(echo "$late" | wc -l)" -ge 6 ] || fail "catch-up: the window's slots did not all run: $late"
grep -q ' missed ' "$work/catchup2.log" || fail "catch-up: no missed line"

if [ "$failures" -gt 0 ]; then
  for l in "$work"/*.log; do echo "--- $l"; cat "$l"; done
  echo "$failures failure(s)"; exit 1
fi
echo "coordctl cron policies: ok"
