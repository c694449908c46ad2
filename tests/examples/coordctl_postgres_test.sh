#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store postgres:CONNINFO against the test server: the same
# answers and exit codes as with a file store.
set -u
ctl="$1"
store="postgres:$2"
pg_script="${3:-}"  # tests/postgres/postgres.sh and the server's directory: to pause it
pg_dir="${4:-}"
run="r$$"
err=/tmp/coordctl_pg_stderr.$$
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
# A schema of its own: before `store init`, nothing that needs the store's
# records is answered (exit 1, naming the step) and opening makes no store;
# init without floors is a usage error (2); once initialized, init again is
# refused (3).
schema="coordctl_$$"
psql -q -d "$2" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema" \
  || fail "psql could not make schema $schema"
own="postgres:$2 options='-c search_path=$schema'"
expect 1 "" -- segment next --store "$own" --tag t
first_init "$own"
expect 0 "accepted" -- fence write --store "$own" --key k --token 5 --value v
# --force with floors: a fence below the fence floor is refused, IDs continue above the segment floor.
out=$("$ctl" store init --store "$own" --segment-floor 5000 --fence-floor 100 --ledger-floor now --force); rc=$?
[ "$rc" = 0 ] || fail "store init --force: rc=$rc '$out'"
expect 3 "rejected: stale fence (highest 100)" -- fence write --store "$own" --key k --token 99 --value w
expect 3 "rejected: stale fence (highest 100)" -- fence write --store "$own" --key new --token 7 --value w
first=$("$ctl" segment next --store "$own" --tag t -n 1)
[ "$first" -gt 5000 ] 2>/dev/null || fail "segment after --segment-floor 5000: '$first'"
psql -q -d "$2" -c "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE" || true

init_store  # the shared schema: initialized once (refused when done already: fine)
expect 0 "fence=0 value=" -- fence read --store "$store" --key "$run"
expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 42 --value B
expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key "$run" --token 41 --value A
expect 0 "fence=42 value=B" -- fence read --store "$store" --key "$run"
grant t1 -- lease acquire --store "$store" --name "$run" --owner A --ttl 60000
expect 3 "held by A" -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
expect 3 "not the holder" -- lease release --store "$store" --name "$run" --owner B
expect 0 "renewed token=$t1" -- lease renew --store "$store" --name "$run" --owner A
expect 0 "released" -- lease release --store "$store" --name "$run" --owner A
grant t2 -- lease acquire --store "$store" --name "$run" --owner B --ttl 60000
above "$t1" "$t2" "the next grant"
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

# Connecting writes nothing to stderr (no NOTICE about existing relations).
expect 0 "fence=42 value=B" -- fence read --store "$store" --key "$run"
[ -s /tmp/coordctl_pg_stderr.$$ ] && { echo "FAIL: stderr at connect: $(cat /tmp/coordctl_pg_stderr.$$)"; failures=$((failures + 1)); }
# A malformed conninfo is bad usage (2); an unreachable server is infrastructure (1, above).
expect 2 "" -- fence read --store "postgres:host=127.0.0.1 port" --key k
expect 2 "" -- fence read --store "postgres:postgresql://[::1" --key k
# Names that are not valid UTF-8 get the answer they get on every store;
# values are bytes; stored strings are printed escaped.
expect 2 "" -- fence write --store "$store" --key $'\xff\xfe' --token 1 --value V
expect 2 "" -- lease acquire --store "$store" --name "$run-u" --owner $'A\xc0\x80' --ttl 60000
expect 0 "accepted" -- fence write --store "$store" --key "$run-bytes" --token 1 --value $'a\x01\xffb\n'
expect 0 'fence=1 value=a\x01\xffb\n' -- fence read --store "$store" --key "$run-bytes"
grant t -- lease acquire --store "$store" --name "$run-forge" --owner $'x\ntoken=999' --ttl 60000
expect 3 'held by x\ntoken=999' -- lease acquire --store "$store" --name "$run-forge" --owner B --ttl 60000

# Every expiry is judged on the server's clock: a worker whose own clock is
# hours ahead (faketime) cannot take a slot that another worker holds, and
# a service instance whose clock is hours ahead still finds a live session.
if ! command -v faketime >/dev/null; then
  echo "FAIL: faketime is missing (tests/setup.sh installs it)"; failures=$((failures + 1))
else
  # libfaketime is preloaded: a sanitizer build must not insist on coming first.
  faketime() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" command faketime "$@"; }
  cslot="claim$$@$(date -u +%Y-%m-%dT%H:%M)Z"
  expect 0 "granted fence=1 attempt=1" -- ledger claim --store "$store" --slot "$cslot" --worker A --lease-ttl 60000
  out=$(faketime -f '+2h' "$ctl" ledger claim --store "$store" --slot "$cslot" --worker B --lease-ttl 60000 2>&1); rc=$?
  [ "$rc" = 3 ] && [ "$out" = "in progress holder=A" ] \
    || { echo "FAIL: a worker 2 h ahead took a held slot: rc=$rc '$out'"; failures=$((failures + 1)); }
  out=$(faketime -f '-2h' "$ctl" ledger claim --store "$store" --slot "$cslot" --worker C --lease-ttl 60000 2>&1); rc=$?
  [ "$rc" = 3 ] && [ "$out" = "in progress holder=A" ] \
    || { echo "FAIL: a worker 2 h behind: rc=$rc '$out'"; failures=$((failures + 1)); }
  sess=$("$ctl" session create --store "$store" --user alice --idle-timeout 3600 --absolute-timeout 7200 2>&1)
  id=${sess#id=}; id=${id%% *}
  out=$(faketime -f '+3h' "$ctl" session load --store "$store" --id "$id" 2>&1); rc=$?
  [ "$rc" = 0 ] && [ "${out% remaining=*}" = "user=alice version=1" ] \
    || { echo "FAIL: an instance 3 h ahead judged a live session: rc=$rc '$out' (create: '$sess')"; failures=$((failures + 1)); }
  expect 0 "revoked" -- session revoke --store "$store" --id "$id"
  expect 3 "not found" -- session load --store "$store" --id "$id"
fi
expect 2 "" -- session create --store "file:/tmp/coordctl_pg_nosessions.$$" --user alice
rm -f /tmp/coordctl_pg_nosessions.$$ /tmp/coordctl_pg_nosessions.$$.lock
# lease acquire --wait: granted when the holder lets go (NOTIFY), or exit 3 at the deadline.
grant w1 -- lease acquire --store "$store" --name "w$run" --owner A --ttl 600000
( sleep 0.3; "$ctl" lease release --store "$store" --name "w$run" --owner A >/dev/null ) &
grant w2 -- lease acquire --store "$store" --name "w$run" --owner B --ttl 600000 --wait 20s
wait
above "$w1" "$w2" "the waiting acquire"
expect 3 "held by B" -- lease acquire --store "$store" --name "w$run" --owner C --ttl 600000 --wait 100ms

# A paused server (SIGSTOP): --timeout bounds the command; it exits 1 and
# says what the caller may assume (a new process cannot connect: not applied).
if [ -n "$pg_script" ]; then
  bash "$pg_script" pause "$pg_dir"
  start=$(date +%s%N)
  out=$(timeout 30 "$ctl" fence write --store "$store" --key "$run" --token 50 --value P --timeout 1s 2>/tmp/coordctl_pg_stderr.$$); rc=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  bash "$pg_script" resume "$pg_dir"
  # (a hang guard, not a speed claim: the wait has no end without the timeout)
  [ "$rc" = 1 ] && [ -z "$out" ] && [ "$took_ms" -lt 10000 ] && grep -Eq "not applied|outcome is unknown" /tmp/coordctl_pg_stderr.$$ \
    || { echo "FAIL: a paused server with --timeout 1s: rc=$rc ${took_ms}ms out='$out' $(cat /tmp/coordctl_pg_stderr.$$)"; failures=$((failures + 1)); }
  expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 51 --value Q --timeout 5s
  expect 2 "" -- fence read --store "$store" --key "$run" --timeout forever
fi
rm -f /tmp/coordctl_pg_stderr.$$
if [ "$failures" != 0 ]; then echo "$failures coordctl postgres check(s) failed"; exit 1; fi
echo "coordctl postgres: all checks passed"
