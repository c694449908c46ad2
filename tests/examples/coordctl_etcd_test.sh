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
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl etcd check(s) failed"; exit 1; fi
echo "coordctl etcd: all checks passed"
