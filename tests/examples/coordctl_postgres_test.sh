#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store postgres:CONNINFO against the test server: the same
# answers and exit codes as with a file store.
set -u
ctl="$1"
store="postgres:$2"
run="r$$"
failures=0
expect() {
  local want_rc="$1" want_out="$2"; shift 3
  local out rc
  out=$("$ctl" "$@" 2>/tmp/coordctl_pg_stderr.$$); rc=$?
  if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ]; then
    echo "FAIL: coordctl $*"
    echo "  want rc=$want_rc out='$want_out'"
    echo "  got  rc=$rc out='$out' stderr='$(cat /tmp/coordctl_pg_stderr.$$)'"
    failures=$((failures + 1))
  fi
}
expect 0 "fence=0 value=" -- fence read --store "$store" --key "$run"
expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 42 --value B
expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key "$run" --token 41 --value A
expect 0 "fence=42 value=B" -- fence read --store "$store" --key "$run"
expect 0 "token=1" -- lease acquire --store "$store" --name "$run" --owner A --ttl 60000
expect 3 "held by A" -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
expect 3 "not the holder" -- lease release --store "$store" --name "$run" --owner B
expect 0 "renewed token=1" -- lease renew --store "$store" --name "$run" --owner A
expect 0 "released" -- lease release --store "$store" --name "$run" --owner A
expect 0 "token=2" -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
a=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
b=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
all=$(printf '%s\n%s\n' "$a" "$b")
[ "$(echo "$all" | wc -l)" = 6 ] && [ "$(echo "$all" | sort -n | uniq | wc -l)" = 6 ] \
  || { echo "FAIL: segment IDs across invocations: $all"; failures=$((failures + 1)); }
expect 1 "" -- fence read --store "postgres:host=127.0.0.1 port=1 dbname=none connect_timeout=2" --key k
slot="billing$$@$(date -u +%Y-%m-%dT%H:%M)Z"
effects=$(mktemp)
expect 0 "applied" -- ledger run --store "$store" --slot "$slot" --effect-file "$effects"
expect 0 "replayed" -- ledger run --store "$store" --slot "$slot" --effect-file "$effects"
[ "$(wc -l < "$effects")" = 1 ] || { echo "FAIL: ledger effect ran $(wc -l < "$effects") times"; failures=$((failures + 1)); }
rm -f "$effects"
rm -f /tmp/coordctl_pg_stderr.$$
if [ "$failures" != 0 ]; then echo "$failures coordctl postgres check(s) failed"; exit 1; fi
echo "coordctl postgres: all checks passed"
