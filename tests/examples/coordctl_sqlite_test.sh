#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store sqlite:PATH: the same answers and exit codes as with
# a file store, several invocations at once on one database, sessions, and
# bad files refused naming them.
set -u
ctl="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
store="sqlite:$dir/coord.db"
err="$dir/stderr"
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
expect 0 "fence=0 value=" -- fence read --store "$store" --key k
expect 0 "accepted" -- fence write --store "$store" --key k --token 42 --value B
expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key k --token 41 --value A
expect 0 "fence=42 value=B" -- fence read --store "$store" --key k --timeout 2s
ln -s "$dir/coord.db" "$dir/link.db"
expect 0 "fence=42 value=B" -- fence read --store "sqlite:$dir/link.db" --key k
expect 0 "fence=42 value=B" -- fence read --store "sqlite:$dir/./coord.db" --key k
grant t1 -- lease acquire --store "$store" --name n --owner A --ttl 600000
expect 3 "held by A" -- lease acquire --store "sqlite:$dir/link.db" --name n --owner B --ttl 600000
expect 0 "renewed token=$t1" -- lease renew --store "$store" --name n --owner A
expect 0 "released" -- lease release --store "$store" --name n --owner A
grant t2 -- lease acquire --store "$store" --name n --owner B --ttl 600000
above "$t1" "$t2" "the next grant"

for p in 1 2 3 4; do "$ctl" segment next --store "$store" --tag orders -n 200 > "$dir/seg$p" & done
wait
cat "$dir"/seg[1-4] > "$dir/seg_all"
[ "$(wc -l < "$dir/seg_all")" = 800 ] && [ "$(sort -n "$dir/seg_all" | uniq | wc -l)" = 800 ] \
  || { echo "FAIL: concurrent segment next on sqlite gave duplicates or too few IDs"; failures=$((failures + 1)); }
for run in 1 2 3; do "$ctl" snowflake next -n 100 --node 3 --state "sqlite:$dir/sf.db" >> "$dir/sf_ids" || failures=$((failures + 1)); done
[ "$(wc -l < "$dir/sf_ids")" = 300 ] && [ "$(sort -n "$dir/sf_ids" | uniq)" = "$(cat "$dir/sf_ids")" ] \
  || { echo "FAIL: snowflake runs on one sqlite state repeated or reordered IDs"; failures=$((failures + 1)); }

slot="billing@$(date -u +%Y-%m-%dT%H:00)Z"
for p in $(seq 1 10); do "$ctl" ledger run --store "$store" --slot "$slot" --effect-file "$dir/effects" > "$dir/run$p" 2>&1 & done
wait
[ "$(wc -l < "$dir/effects")" = 1 ] \
  || { echo "FAIL: 10 ledger runs on sqlite appended $(wc -l < "$dir/effects") lines"; failures=$((failures + 1)); }
expect 0 "replayed" -- ledger run --store "$store" --slot "$slot" --effect-file "$dir/effects"

sess=$("$ctl" session create --store "$store" --user alice --idle-timeout 3600 --absolute-timeout 7200 2>&1)
id=${sess#id=}; id=${id%% *}
out=$("$ctl" session load --store "$store" --id "$id" 2>&1); rc=$?
[ "$rc" = 0 ] && [ "${out% remaining=*}" = "user=alice version=1" ] \
  || { echo "FAIL: session load on sqlite: rc=$rc '$out' (create: '$sess')"; failures=$((failures + 1)); }
expect 0 "revoked" -- session revoke --store "$store" --id "$id"
expect 3 "not found" -- session load --store "$store" --id "$id"

printf 'not a database at all, just text that goes on and on and on ..........' > "$dir/notes.txt"
expect 1 "" -- fence read --store "sqlite:$dir/notes.txt" --key k
grep -q "$dir/notes.txt" "$dir/stderr" && grep -q "not an SQLite database" "$dir/stderr" \
  || { echo "FAIL: a text file as the store: $(cat "$dir/stderr")"; failures=$((failures + 1)); }
[ "$(cat "$dir/notes.txt")" = 'not a database at all, just text that goes on and on and on ..........' ] \
  || { echo "FAIL: the text file was changed"; failures=$((failures + 1)); }
expect 2 "" -- fence read --store "sqlite:" --key k
expect 2 "" -- fence read --store "$store" --key k --timeout 0ms

# lease acquire --wait: granted when the holder lets go, or exit 3 at the deadline.
grant w1 -- lease acquire --store "sqlite:$dir/wq.db" --name q --owner A --ttl 600000
( sleep 0.3; "$ctl" lease release --store "sqlite:$dir/wq.db" --name q --owner A >/dev/null ) &
grant w2 -- lease acquire --store "sqlite:$dir/wq.db" --name q --owner B --ttl 600000 --wait 20s
wait
above "$w1" "$w2" "the waiting acquire"
expect 3 "held by B" -- lease acquire --store "sqlite:$dir/wq.db" --name q --owner C --ttl 600000 --wait 100ms
expect 2 "" -- lease acquire --store "sqlite:$dir/wq.db" --name q --owner C --ttl 600000 --wait 0s
expect 2 "" -- lease acquire --store "sqlite:$dir/wq.db" --name q --owner C --ttl 600000 --wait soon

# A database put back from an older copy (cp, between invocations): refused
# (exit 1, naming what went back and what to do), never served: the fence that
# accepted 9 does not accept 6, the segment range is not handed out again.
expect 0 "accepted" -- fence write --store "sqlite:$dir/back.db" --key k --token 5 --value v
cp "$dir/back.db" "$dir/back-old.db"
expect 0 "accepted" -- fence write --store "sqlite:$dir/back.db" --key k --token 9 --value v
expect 0 $'1\n2\n3' -- segment next --store "sqlite:$dir/back.db" --tag t -n 3
cp "$dir/back-old.db" "$dir/back.db"; rm -f "$dir/back.db-wal" "$dir/back.db-shm"
expect 1 "" -- fence write --store "sqlite:$dir/back.db" --key k --token 6 --value late
grep -q "went back.*older copy.*newest copy" "$err" || fail "the refusal does not say what went back: $(cat "$err")"
expect 1 "" -- segment next --store "sqlite:$dir/back.db" --tag t -n 3
# The recovery the refusal names: store init --force with floors above what
# was handed out; then 6 and 9 stay refused and IDs continue above 3.
out=$("$ctl" store init --store "sqlite:$dir/back.db" --segment-floor 3 --fence-floor 9 --ledger-floor now); rc=$?
[ "$rc" = 3 ] && [[ "$out" == "refused: the store is already initialized: "*"--force"* ]] \
  || fail "store init without --force: rc=$rc '$out'"
out=$("$ctl" store init --store "sqlite:$dir/back.db" --segment-floor 3 --fence-floor 9 --ledger-floor now --force); rc=$?
[ "$rc" = 0 ] && [[ "$out" =~ ^initialized:\ identity\ [0-9a-f]{32}$ ]] || fail "store init --force: rc=$rc '$out' $(cat "$err")"
expect 3 "rejected: stale fence (highest 9)" -- fence write --store "sqlite:$dir/back.db" --key k --token 6 --value late
expect 0 "accepted" -- fence write --store "sqlite:$dir/back.db" --key k --token 10 --value v
expect 0 $'4\n5\n6' -- segment next --store "sqlite:$dir/back.db" --tag t -n 3

if [ "$failures" -ne 0 ]; then echo "$failures coordctl sqlite check(s) failed"; exit 1; fi
echo "coordctl sqlite: all checks passed"
