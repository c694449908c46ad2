#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store redis://HOST:PORT/DB against the test server: the
# same answers and exit codes as with a file store (lease tokens are the
# server's time in microseconds, so only their order is checked), `store
# init` and its refusals, the server's clock judging every expiry, and a
# paused server bounded by --timeout.
set -u
ctl="$1"
url="$2"              # redis://127.0.0.1:PORT
redis_script="${3:-}" # tests/redis/redis.sh, the server's directory and port: to pause it
redis_dir="${4:-}"
redis_port="${5:-}"
store="$url/1"        # database 1: the library's tests use 0
run="r$$"
err=/tmp/coordctl_redis_stderr.$$
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
redis-cli -p "$redis_port" -n 1 flushdb >/dev/null

# Before `store init`, what needs the store's data is refused (exit 1, a
# corrupt-state condition naming what may be lost and the safe procedure:
# floors above what the store handed out); leases already work.
expect 1 "" -- fence read --store "$store" --key "$run"
grep -q "segment counters" $err && grep -q -- "--segment-floor N (at least the largest segment ID" $err \
  || fail "the refusal does not name what was lost and the floors: $(cat $err)"
# store init states the floors; without them it is refused (2), naming them.
expect 2 "" -- store init --store "$store"
grep -q -- "--segment-floor N" $err || fail "store init without floors does not name them: $(cat $err)"
expect 2 "" -- store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor yesterday
out=$("$ctl" store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor none); rc=$?
[ "$rc" = 0 ] && [[ "$out" =~ ^initialized:\ identity\ [0-9a-f]{32}$ ]] || fail "store init: rc=$rc '$out'"
out=$("$ctl" store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor none); rc=$?
[ "$rc" = 3 ] && [[ "$out" == "refused: the store is already initialized: "*"--force"* ]] \
  || fail "store init over an initialized store: rc=$rc '$out'"
out=$("$ctl" store init --store "$store" --segment-floor 0 --fence-floor 0 --ledger-floor none --force); rc=$?
[ "$rc" = 0 ] && [[ "$out" =~ ^initialized: ]] || fail "store init --force: rc=$rc '$out'"
expect 2 "" -- store init --store "$store" --force yes

engine_store_checks "$store" "$run" 9
slot="billing$$@$(date -u +%Y-%m-%dT%H:%M)Z"
effects=$(mktemp)
expect 0 "applied" -- ledger run --store "$store" --slot "$slot" --effect-file "$effects"
expect 0 "replayed" -- ledger run --store "$store" --slot "$slot" --effect-file "$effects"
[ "$(wc -l < "$effects")" = 1 ] || fail "ledger effect ran $(wc -l < "$effects") times"
rm -f "$effects"

# Bad addresses: malformed is usage (2); nobody listening is infrastructure (1).
expect 2 "" -- fence read --store "redis://127.0.0.1:0" --key k
expect 2 "" -- fence read --store "redis://127.0.0.1:1/99" --key k
expect 1 "" -- fence read --store "redis://127.0.0.1:1" --key k
grep -q "not applied" $err || fail "an unreachable server does not say what to assume: $(cat $err)"

# Every expiry is judged on the server's clock: a worker whose clock is hours
# ahead cannot take a held slot; an instance hours ahead finds a live session.
if ! command -v faketime >/dev/null; then
  fail "faketime is missing (tests/setup.sh installs it)"
else
  faketime() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" command faketime "$@"; }
  cslot="claim$$@$(date -u +%Y-%m-%dT%H:%M)Z"
  expect 0 "granted fence=1 attempt=1" -- ledger claim --store "$store" --slot "$cslot" --worker A --lease-ttl 60000
  out=$(faketime -f '+2h' "$ctl" ledger claim --store "$store" --slot "$cslot" --worker B --lease-ttl 60000 2>&1); rc=$?
  [ "$rc" = 3 ] && [ "$out" = "in progress holder=A" ] || fail "a worker 2 h ahead took a held slot: rc=$rc '$out'"
  sess=$("$ctl" session create --store "$store" --user alice --idle-timeout 3600 --absolute-timeout 7200 2>&1)
  id=${sess#id=}; id=${id%% *}
  out=$(faketime -f '+3h' "$ctl" session load --store "$store" --id "$id" 2>&1); rc=$?
  [ "$rc" = 0 ] && [ "${out% remaining=*}" = "user=alice version=1" ] || fail "an instance 3 h ahead: rc=$rc '$out' ('$sess')"
  expect 0 "revoked" -- session revoke --store "$store" --id "$id"
  expect 3 "not found" -- session load --store "$store" --id "$id"
fi
# lease acquire --wait: granted when the holder lets go (PUBLISH), or exit 3 at the deadline.
w1=$("$ctl" lease acquire --store "$store" --name "w$run" --owner A --ttl 600000)
( sleep 0.3; "$ctl" lease release --store "$store" --name "w$run" --owner A >/dev/null ) &
w2=$("$ctl" lease acquire --store "$store" --name "w$run" --owner B --ttl 600000 --wait 20s); rc=$?
wait
[ "$rc" = 0 ] && [ "${w2#token=}" -gt "${w1#token=}" ] 2>/dev/null || fail "waiting acquire: rc=$rc '$w1' then '$w2'"
expect 3 "held by B" -- lease acquire --store "$store" --name "w$run" --owner C --ttl 600000 --wait 100ms

# A paused server (SIGSTOP): --timeout bounds the command; exit 1 says what to assume.
if [ -n "$redis_script" ]; then
  bash "$redis_script" pause "$redis_dir"
  start=$(date +%s%N)
  out=$(timeout 30 "$ctl" fence write --store "$store" --key "$run" --token 18446744073709551615 --value P --timeout 1s 2>$err); rc=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  bash "$redis_script" resume "$redis_dir"
  [ "$rc" = 1 ] && [ -z "$out" ] && [ "$took_ms" -lt 10000 ] && grep -Eq "not applied|outcome is unknown" $err \
    || fail "a paused server with --timeout 1s: rc=$rc ${took_ms}ms out='$out' $(cat $err)"
  expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 18446744073709551615 --value Q --timeout 5s
fi

# After the server lost its data (restarted without it): refused, then the
# README's procedure to the letter ("When a store lost its data"): initialize
# with floors at or above what the store handed out. No segment ID, fence
# acceptance, lease token or done slot is handed out twice.
if [ -n "$redis_script" ]; then
  ids_before=$("$ctl" segment next --store "$store" --tag "loss$run" -n 5)
  lease_before=$("$ctl" lease acquire --store "$store" --name "loss$run" --owner A --ttl 600000)
  token_before=${lease_before#token=}
  expect 0 "accepted" -- fence write --store "$store" --key "loss$run" --token "$token_before" --value A
  lslot="loss$$@$(date -u +%Y-%m-%dT%H:%M)Z"
  leffects=$(mktemp)
  expect 0 "applied" -- ledger run --store "$store" --slot "$lslot" --effect-file "$leffects"
  bash "$redis_script" lose "$redis_dir" "$redis_port"
  expect 1 "" -- segment next --store "$store" --tag "loss$run"
  grep -q "lost its data" $err || fail "after the loss: $(cat $err)"
  expect 1 "" -- ledger run --store "$store" --slot "$lslot" --effect-file "$leffects"
  # The procedure: the largest segment ID handed out (here: from the IDs the
  # application stored), the fence floor at the server's now (every lease
  # token this Redis granted is below it), slots up to now not run again.
  largest=$(echo "$ids_before" | sort -n | tail -1)
  out=$("$ctl" store init --store "$store" --segment-floor "$largest" --fence-floor now --ledger-floor now); rc=$?
  [ "$rc" = 0 ] || fail "store init after the loss: rc=$rc '$out' $(cat $err)"
  ids_after=$("$ctl" segment next --store "$store" --tag "loss$run" -n 5)
  [ "$(printf '%s\n%s\n' "$ids_before" "$ids_after" | sort -n | uniq -d)" = "" ] \
    || fail "segment IDs handed out twice: before $ids_before after $ids_after"
  [ "$(echo "$ids_after" | sort -n | head -1)" -gt "$largest" ] || fail "segment IDs at or below the floor: $ids_after"
  out=$("$ctl" fence write --store "$store" --key "loss$run" --token "$token_before" --value late); rc=$?
  [ "$rc" = 3 ] && [[ "$out" == "rejected: stale fence"* ]] || fail "the old holder's token passed after the loss: rc=$rc '$out'"
  lease_after=$("$ctl" lease acquire --store "$store" --name "loss$run" --owner B --ttl 600000)
  [ "${lease_after#token=}" -gt "$token_before" ] 2>/dev/null || fail "a lease token went back: $lease_before then $lease_after"
  expect 0 "accepted" -- fence write --store "$store" --key "loss$run" --token "${lease_after#token=}" --value B
  expect 3 "expired" -- ledger run --store "$store" --slot "$lslot" --effect-file "$leffects"
  [ "$(wc -l < "$leffects")" = 1 ] || fail "a done slot ran again after the loss: $(cat "$leffects")"
  rm -f "$leffects"
fi
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl redis check(s) failed"; exit 1; fi
echo "coordctl redis: all checks passed"
