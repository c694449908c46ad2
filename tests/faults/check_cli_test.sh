#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coord_fault_check: exit 0 and a summary on a valid history, exit 1 naming
# the violation on a bad one, exit 2 on a history it cannot read.
set -u
check="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cat > "$dir/ok.jsonl" <<'H'
{"t0":0,"t1":10,"proc":"c1","f":"write","key":"r","token":5,"value":"a","type":"ok"}
{"t0":20,"t1":30,"proc":"c2","f":"write","key":"r","token":9,"value":"b","type":"ok"}
{"t0":5,"t1":25,"proc":"nemesis","f":"fault","kind":"server-kill","target":"s0","type":"ok"}
H
cat > "$dir/bad.jsonl" <<'H'
{"t0":0,"t1":10,"proc":"c2","f":"write","key":"r","token":9,"value":"b","type":"ok"}
{"t0":20,"t1":30,"proc":"c1","f":"write","key":"r","token":5,"value":"a","type":"ok"}
H
out=$("$check" "$dir/ok.jsonl" --summary "$dir/summary.json"); rc=$?
[ "$rc" = 0 ] || fail "valid history: rc=$rc $out"
echo "$out" | grep -Eq '^register +2 +2 +0 +0 +0$' || fail "the table: $out"
echo "$out" | grep -Eq '^fault server-kill +1$' || fail "the faults: $out"
grep -q '"violations": 0' "$dir/summary.json" || fail "summary: $(cat "$dir/summary.json")"
out=$("$check" "$dir/bad.jsonl"); rc=$?
[ "$rc" = 1 ] || fail "bad history: rc=$rc"
echo "$out" | grep -q '^VIOLATION register: stale write accepted after a newer one: op 2' || fail "the violation: $out"
echo '{"t0":' > "$dir/broken.jsonl"
"$check" "$dir/broken.jsonl" 2>/dev/null; rc=$?
[ "$rc" = 2 ] || fail "a broken history: rc=$rc"
# The control must show violations: with the bad history as control the run
# passes (and the summary says so); with a clean control it fails.
out=$("$check" "$dir/ok.jsonl" --control "$dir/bad.jsonl" --summary "$dir/s2.json" --svg "$dir/t.svg" --meta engine=file --meta not_run.partition=embedded); rc=$?
[ "$rc" = 0 ] || fail "a control with violations: rc=$rc $out"
echo "$out" | grep -q '^control: 1 violations (expected' || fail "the control line: $out"
echo "$out" | grep -q '^not run: partition  *embedded' || fail "the not-run line: $out"
grep -q '"passed": true' "$dir/s2.json" && grep -q '"engine": "file"' "$dir/s2.json" && grep -q '"partition": "embedded"' "$dir/s2.json" ||
  fail "summary with control: $(cat "$dir/s2.json")"
grep -q '^<svg' "$dir/t.svg" && grep -q 'fill="#d62728"' "$dir/t.svg" && grep -q 'server-kill' "$dir/t.svg" ||
  fail "the timeline: $(head -c 600 "$dir/t.svg")"
out=$("$check" "$dir/ok.jsonl" --control "$dir/ok.jsonl" --summary "$dir/s3.json"); rc=$?
[ "$rc" = 1 ] || fail "a control without violations: rc=$rc"
echo "$out" | grep -q 'THE CONTROL PASSED' || fail "the passed control: $out"
grep -q '"passed": false' "$dir/s3.json" || fail "summary of a passed control: $(cat "$dir/s3.json")"
[ "$failures" = 0 ] || exit 1
echo "coord_fault_check: ok"
