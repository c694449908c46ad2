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
[ "$failures" = 0 ] || exit 1
echo "coord_fault_check: ok"
