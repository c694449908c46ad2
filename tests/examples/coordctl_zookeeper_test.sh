#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store zookeeper://HOST:PORT/ROOT against the standalone test
# server: the same answers and exit codes as with a file store (a lease
# outlives the coordctl that took it, for its TTL; tokens are zxids, so only
# their order is checked), and a clear error for what ZooKeeper does not keep.
set -u
ctl="$1"
store="$2/coordctl$$"   # zookeeper://127.0.0.1:PORT and a root of this run's own
run="r$$"
failures=0
err=/tmp/coordctl_zk_stderr.$$
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {
  local want_rc="$1" want_out="$2"; shift 3
  local out rc
  out=$("$ctl" "$@" 2>$err); rc=$?
  if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ]; then
    fail "coordctl $*"
    echo "  want rc=$want_rc out='$want_out'"
    echo "  got  rc=$rc out='$out' stderr='$(cat $err)'"
  fi
}
expect 0 "initialized: this store needs no initialization" -- store init --store "$store"
expect 0 "fence=0 value=" -- fence read --store "$store" --key "$run"
expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 42 --value B
expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key "$run" --token 41 --value A
expect 0 "fence=42 value=B" -- fence read --store "$store" --key "$run"
expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 18446744073709551615 --value top
expect 3 "rejected: stale fence (highest 18446744073709551615)" -- fence write --store "$store" --key "$run" --token 18446744073709551614 --value A
a1=$("$ctl" lease acquire --store "$store" --name "$run" --owner A --ttl 60000); rc=$?
[ "$rc" = 0 ] && [[ "$a1" =~ ^token=[0-9]+$ ]] || fail "lease acquire: rc=$rc '$a1'"
# The lease outlived the coordctl that took it:
expect 3 "held by A" -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
expect 3 "not the holder" -- lease release --store "$store" --name "$run" --owner B
expect 0 "renewed $a1" -- lease renew --store "$store" --name "$run" --owner A
expect 0 "released" -- lease release --store "$store" --name "$run" --owner A
b1=$("$ctl" lease acquire --store "$store" --name "$run" --owner B --ttl 60000)
[ "${b1#token=}" -gt "${a1#token=}" ] 2>/dev/null || fail "the next token $b1 is not above $a1"
a=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
b=$("$ctl" segment next --store "$store" --tag "$run" -n 3)
all=$(printf '%s\n%s\n' "$a" "$b")
[ "$(echo "$all" | wc -l)" = 6 ] && [ "$(echo "$all" | sort -n | uniq | wc -l)" = 6 ] || fail "segment IDs across invocations: $all"
ids=$("$ctl" snowflake next --node 12 -n 3 --state "$store"); rc=$?
[ "$rc" = 0 ] && [ "$(echo "$ids" | sort -n | uniq | wc -l)" = 3 ] || fail "snowflake on zookeeper: rc=$rc '$ids'"
expect 2 "" -- session create --store "$store" --user alice
grep -q "keeps no sessions" $err || fail "sessions on zookeeper: $(cat $err)"
slot="billing$$@$(date -u +%Y-%m-%dT%H:%M)Z"
expect 2 "" -- ledger claim --store "$store" --slot "$slot" --worker A
grep -q "keeps no job ledger" $err || fail "ledger on zookeeper: $(cat $err)"
expect 2 "" -- fence read --store "zookeeper://127.0.0.1" --key k
expect 2 "" -- fence read --store "zookeeper://127.0.0.1:1//x" --key k
expect 1 "" -- fence read --store "zookeeper://127.0.0.1:1" --key k --timeout 1s
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl zookeeper check(s) failed"; exit 1; fi
echo "coordctl zookeeper: all checks passed"
