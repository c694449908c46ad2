#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store etcd://HOST:PORT against the test member: the same
# answers and exit codes as with a file store (lease tokens are etcd
# revisions, so only their order is checked), an endpoint that cannot be
# reached skipped for the next, and a clear error for what etcd does not keep.
set -u
ctl="$1"
url="$2"   # etcd://127.0.0.1:PORT
run="r$$"
err=/tmp/coordctl_etcd_stderr.$$
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
store="$url"
# A prefix of its own, initialized as the first time.
own="$url?prefix=coordctl-$run"
first_init "$own"
expect 0 "accepted" -- fence write --store "$own" --key k --token 1 --value v
init_store  # the shared default prefix: once (refused when done already: fine)
engine_store_checks "$store" "$run" 11
# A dead endpoint first: the next one answers.
expect 0 "fence=18446744073709551615 value=top" -- fence read --store "etcd://127.0.0.1:1,${url#etcd://}" --key "$run"
# What etcd does not keep is a clear usage error (2), naming the alternatives.
no_sessions "$store"
no_ledger "$store"
# Bad addresses: malformed is usage (2); nobody listening is infrastructure (1).
expect 2 "" -- fence read --store "etcd://127.0.0.1" --key k
expect 1 "" -- fence read --store "etcd://127.0.0.1:1" --key k --timeout 2s
# lease acquire --wait (etcd's lock recipe): a queued waiter SIGKILLed stops
# blocking the line when its place's lease ends; the next waiter is served
# when the holder lets go; a deadline passed is exit 3.
endpoint="http://${url#etcd://}"; endpoint=${endpoint%%,*}
in_line() { ETCDCTL_API=3 etcdctl --endpoints "$endpoint" get --prefix "coord/lock/w$run/" --keys-only | grep -c .; }
until_in_line() { for _ in $(seq 200); do [ "$(in_line)" -ge "$1" ] && return 0; sleep 0.05; done; fail "never $1 key(s) in line"; }
grant w1 -- lease acquire --store "$store" --name "w$run" --owner A --ttl 600000
"$ctl" lease acquire --store "$store" --name "w$run" --owner K --ttl 600000 --wait 60s >/dev/null 2>&1 &
killed=$!
until_in_line 2
"$ctl" lease acquire --store "$store" --name "w$run" --owner B --ttl 600000 --wait 30s > "$err.b" 2>&1 &
b=$!
until_in_line 3
kill -KILL "$killed"; wait "$killed" 2>/dev/null
expect 0 "released" -- lease release --store "$store" --name "w$run" --owner A
wait "$b"; rc=$?
w2=$(cat "$err.b")
[ "$rc" = 0 ] || fail "the waiter behind a SIGKILLed one: rc=$rc '$w2'"
above "$w1" "${w2#token=}" "the waiting acquire"
expect 3 "held by B" -- lease acquire --store "$store" --name "w$run" --owner C --ttl 600000 --wait 100ms
[ "$(in_line)" = 1 ] || fail "a waiter that gave up left its key in line: $(in_line)"
# etcdctl lock on the same name waits behind coord's holder (the same recipe).
out=$(ETCDCTL_API=3 timeout 2 etcdctl --endpoints "$endpoint" lock "coord/lock/w$run" 2>&1); rc=$?
[ "$rc" = 124 ] && [[ "$out" != *"coord/lock/w$run/"* ]] || fail "etcdctl lock took a name coord holds: rc=$rc '$out'"
rm -f "$err.b"
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl etcd check(s) failed"; exit 1; fi
echo "coordctl etcd: all checks passed"
