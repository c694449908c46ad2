#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/faults/run.sh draws its fault schedule from the seed: the same seed
# gives the same schedule, another seed another one; every schedule opens
# with a client pause (the fault the control is caught under) and fits the
# run; the embedded stores get no server or network faults; a cluster's
# server faults are its leader's; with Sentinels, the master's.
set -u
run="$(dirname "$0")/run.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
a=$(bash "$run" --engine redis --seconds 30 --seed 3 --dry-run) || fail "dry run: rc=$?"
b=$(bash "$run" --engine redis --seconds 30 --seed 3 --dry-run)
c=$(bash "$run" --engine redis --seconds 30 --seed 4 --dry-run)
[ -n "$a" ] || fail "an empty schedule"
[ "$a" = "$b" ] || fail "seed 3 drew two schedules:"$'\n'"$a"$'\n---\n'"$b"
[ "$a" != "$c" ] || fail "seeds 3 and 4 drew the same schedule"
[ "$(echo "$a" | head -n 1 | cut -d' ' -f2)" = client-pause ] || fail "the schedule does not open with a client pause: $a"
echo "$a" | while read -r at kind d target; do
  [ $((at + d)) -le 28000 ] || echo "FAIL: $kind at $at for $d ms overruns the 30 s run"
  [ "$target" -ge 0 ] && [ "$target" -le 2 ] || echo "FAIL: target $target"
done | grep -q FAIL && fail "a fault outside the run: $a"
f=$(bash "$run" --engine file --seconds 30 --seed 3 --dry-run)
echo "$f" | grep -Eq 'server|partition|connection' && fail "server or network faults on the file store: $f"
echo "$a" | grep -q leader- && fail "leader faults on a single server: $a"
g=$(bash "$run" --engine zookeeper-ensemble --seconds 60 --seed 3 --dry-run)
echo "$g" | grep -q leader-kill || fail "no leader kill on an ensemble: $g"
echo "$g" | grep -q server- && fail "single-server faults on an ensemble: $g"
p=$(bash "$run" --engine postgres-standby --seconds 60 --seed 3 --dry-run)
echo "$p" | grep -q primary-kill || fail "no failover on a primary and its standby: $p"
echo "$p" | grep -Eq 'server-|leader-' && fail "single-server or cluster faults on a primary and its standby: $p"
r=$(bash "$run" --engine redis-sentinel --seconds 60 --seed 3 --dry-run)
echo "$r" | grep -q master-kill || fail "no master kill with Sentinels: $r"
second=master-partition; [ "$(id -u)" = 0 ] || second=master-kill  # (partitions need root)
[ "$(echo "$r" | sed -n 2p | cut -d' ' -f2)" = "$second" ] || fail "no $second right after the client pause with Sentinels: $r"
echo "$r" | grep -Eq 'server-|leader-|primary-' && fail "single-server, cluster or standby faults with Sentinels: $r"
bash "$run" --engine nosuch --dry-run 2>/dev/null; [ $? = 2 ] || fail "an unknown engine is not a usage error"
bash "$run" --engine file --seconds 5 --dry-run 2>/dev/null; [ $? = 2 ] || fail "--seconds 5 is not a usage error"
[ "$failures" = 0 ] || exit 1
echo "fault schedules: ok"
