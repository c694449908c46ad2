#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl on a Redis that takes TLS only, with client certificates, and ACL
# users only (tests/redis/redis.sh start DIR PORT secure: the default user
# off; coord may run everything, reader only read commands): over rediss://
# with --store-ca-file, --store-cert-file, --store-key-file, --store-user and
# the password from --store-password-file or COORD_STORE_PASSWORD coord
# works; another CA, no client certificate, no credentials, a wrong password
# and a user without the rights are refused as configuration errors (exit 2,
# never "retry later"), the password in no message.
# Usage: coordctl_redis_secure_test.sh COORDCTL URL DIR   (URL: rediss://HOST:PORT)
set -u
ctl="$1"; store="$2/0"; dir="$3"
err=$(mktemp); wrong=$(mktemp)
trap 'rm -f "$err" "$wrong"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
run="s$$"
tls=(--store-ca-file "$dir/tls/ca.crt" --store-cert-file "$dir/tls/client.crt" --store-key-file "$dir/tls/client.key")
as_coord=("${tls[@]}" --store-user coord --store-password-file "$dir/coord.password")
"$ctl" store init --store "$store" "${as_coord[@]}" --segment-floor 0 --fence-floor 0 --ledger-floor none >/dev/null 2>"$err" ||
  [ $? = 3 ] || fail "store init with credentials: $(cat "$err")"
expect 0 "accepted" -- fence write --store "$store" "${as_coord[@]}" --key "$run" --token 7 --value v
COORD_STORE_PASSWORD=$(cat "$dir/coord.password") expect 0 "fence=7 value=v" -- fence read --store "$store" "${tls[@]}" --store-user coord --key "$run"
grant t -- lease acquire --store "$store" "${as_coord[@]}" --name "$run" --owner A --ttl 60000
expect 0 "released" -- lease release --store "$store" "${as_coord[@]}" --name "$run" --owner A

printf 'not-the-password\n' > "$wrong"; chmod 600 "$wrong"
refused "another CA" "certificate" --store-ca-file "$dir/tls/other-ca.crt" --store-cert-file "$dir/tls/client.crt" \
  --store-key-file "$dir/tls/client.key" --store-user coord --store-password-file "$dir/coord.password"
refused "no client certificate" "client certificate" --store-ca-file "$dir/tls/ca.crt" --store-user coord --store-password-file "$dir/coord.password"
refused "no credentials" "NOAUTH" "${tls[@]}"
refused "a wrong password" "WRONGPASS" "${tls[@]}" --store-user coord --store-password-file "$wrong"
refused "a user without the rights" "NOPERM" "${tls[@]}" --store-user reader --store-password-file "$dir/reader.password"
expect 0 "fence=7 value=v" -- fence read --store "$store" "${as_coord[@]}" --key "$run"   # nothing was applied
echo "coordctl redis secure: $failures failure(s)"
[ "$failures" = 0 ]
