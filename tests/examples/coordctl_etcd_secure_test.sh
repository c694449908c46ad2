#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl on an etcd that takes TLS only, wants a client certificate and has
# its authentication on (tests/etcd/etcd.sh start DIR PORT 1 secure: users
# coord, read and write on coord/..., and reader, read only): with the TLS
# files (--store-ca-file, --store-cert-file, --store-key-file), --store-user
# and the password from --store-password-file or COORD_STORE_PASSWORD coord
# works, a waiting acquire too (its watch signed in); no credentials, a wrong
# password, a user without the rights, a CA that did not sign the server's
# certificate, no client certificate and one another CA signed are refused
# as configuration errors (exit 2, never "retry later"), nothing applied, the
# password in no message.
# Usage: coordctl_etcd_secure_test.sh COORDCTL URL DIR
set -u
ctl="$1"; store="$2"; dir="$3"
err=$(mktemp); wrong=$(mktemp)
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -f "$err" "$err.w" "$wrong"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
run="s$$"
certs="$dir/tls"
tls=(--store-ca-file "$certs/ca.crt" --store-cert-file "$certs/client.crt" --store-key-file "$certs/client.key")
as_coord=("${tls[@]}" --store-user coord --store-password-file "$dir/coord.password")
"$ctl" store init --store "$store" "${as_coord[@]}" --segment-floor 0 --fence-floor 0 --ledger-floor none >/dev/null 2>"$err" ||
  [ $? = 3 ] || fail "store init with credentials: $(cat "$err")"
expect 0 "accepted" -- fence write --store "$store" "${as_coord[@]}" --key "$run" --token 7 --value v
COORD_STORE_PASSWORD=$(cat "$dir/coord.password") expect 0 "fence=7 value=v" -- fence read --store "$store" "${tls[@]}" --store-user coord --key "$run"
grant held -- lease acquire --store "$store" "${as_coord[@]}" --name "$run" --owner A --ttl 60000
# A waiter signed in: served when A releases (woken by its watch).
"$ctl" lease acquire --store "$store" "${as_coord[@]}" --name "$run" --owner B --ttl 60000 --wait 30s > "$err.w" 2>&1 &
waiter=$!
# (etcdctl as reader: its user and password from the environment, as
# ETCDCTL_USER allows, on no command line.)
in_line() {
  ETCDCTL_API=3 ETCDCTL_USER="reader:$(cat "$dir/reader.password")" etcdctl --endpoints "https://${store#etcds://}" \
    --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key" get --prefix --keys-only "coord/lock/$run/" | grep -c .
}
for _ in $(seq 1 200); do [ "$(in_line)" -ge 2 ] && break; sleep 0.05; done
[ "$(in_line)" = 2 ] || fail "the waiter is not in line: $(in_line) key(s)"
expect 0 "released" -- lease release --store "$store" "${as_coord[@]}" --name "$run" --owner A
wait "$waiter"; rc=$?
[ "$rc" = 0 ] && grep -q "^token=" "$err.w" || fail "the waiter signed in was not served: rc=$rc $(cat "$err.w")"

printf 'not-the-password\n' > "$wrong"; chmod 600 "$wrong"
refused "no credentials" "user name is empty" "${tls[@]}"
refused "a wrong password" "authentication failed" "${tls[@]}" --store-user coord --store-password-file "$wrong"
refused "a user without the rights" "permission denied" "${tls[@]}" --store-user reader --store-password-file "$dir/reader.password"
refused "a CA that did not sign the server's certificate" "certificate" --store-ca-file "$certs/other-ca.crt" \
  --store-cert-file "$certs/client.crt" --store-key-file "$certs/client.key" --store-user coord --store-password-file "$dir/coord.password"
refused "no client certificate" "TLS handshake" --store-ca-file "$certs/ca.crt" --store-user coord --store-password-file "$dir/coord.password"
refused "a client certificate another CA signed" "TLS handshake" --store-ca-file "$certs/ca.crt" --store-cert-file "$certs/stranger.crt" \
  --store-key-file "$certs/stranger.key" --store-user coord --store-password-file "$dir/coord.password"
expect 2 "" -- fence read --store "etcd://${store#etcds://}" "${as_coord[@]}" --key "$run"
grep -q "TLS files are for an etcds:// URL" "$err" || fail "TLS files with etcd://: $(head -1 "$err")"
expect 0 "fence=7 value=v" -- fence read --store "$store" "${as_coord[@]}" --key "$run"   # nothing was applied
echo "coordctl etcd secure: $failures failure(s)"
[ "$failures" = 0 ]
