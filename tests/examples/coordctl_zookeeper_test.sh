#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl with --store zookeeper://HOST:PORT/ROOT against the standalone test
# server: the same answers and exit codes as with a file store (a lease
# outlives the coordctl that took it, for its TTL; tokens are zxids, so only
# their order is checked), the ledger,
# and a clear error for what ZooKeeper does not keep.
set -u
ctl="$1"
store="$2/coordctl$$"   # zookeeper://127.0.0.1:PORT and a root of this run's own
run="r$$"
err=/tmp/coordctl_zk_stderr.$$
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
first_init "$store"
# (engine_store_checks also shows that a lease outlives the coordctl that took it.)
engine_store_checks "$store" "$run" 12
no_sessions "$store"
# The ledger: a claim, its repeat in progress, a second worker refused.
slot="billing$$@$(date -u +%Y-%m-%dT%H:%M)Z"
expect 0 "granted fence=1 attempt=1" -- ledger claim --store "$store" --slot "$slot" --worker A
expect 3 "in progress holder=A" -- ledger claim --store "$store" --slot "$slot" --worker B
effects=$(mktemp)
expect 0 "applied" -- ledger run --store "$store" --slot "billing$$@2026-01-01T00:00Z" --effect-file "$effects" --replay-window-hours 87840
expect 0 "replayed" -- ledger run --store "$store" --slot "billing$$@2026-01-01T00:00Z" --effect-file "$effects" --replay-window-hours 87840
[ "$(cat "$effects")" = "billing$$@2026-01-01T00:00:00Z" ] || fail "the ledger's effect on zookeeper: $(cat "$effects")"
rm -f "$effects"
expect 2 "" -- fence read --store "zookeeper://127.0.0.1" --key k
expect 2 "" -- fence read --store "zookeeper://127.0.0.1:1//x" --key k
expect 1 "" -- fence read --store "zookeeper://127.0.0.1:1" --key k --timeout 1s
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl zookeeper check(s) failed"; exit 1; fi
echo "coordctl zookeeper: all checks passed"
