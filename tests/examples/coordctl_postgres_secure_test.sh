#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl on a PostgreSQL that takes TLS only, with SCRAM-SHA-256
# passwords (tests/postgres/postgres.sh start DIR PORT secure: a throwaway
# CA, the server's certificate for localhost): with sslmode=verify-full,
# the CA and a passfile (the password never on the command line) coord
# works; a server certificate another CA signed, no TLS, a wrong password
# and a role without rights on coord's tables are refused as configuration
# errors (exit 2, never "retry later"), the password in no message.
# Usage: coordctl_postgres_secure_test.sh COORDCTL CONNINFO DIR
set -u
ctl="$1"; conninfo="$2"; dir="$3"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"
store="postgres:$conninfo"
run="s$$"
init_store
expect 0 "accepted" -- fence write --store "$store" --key "$run" --token 7 --value v
expect 0 "fence=7 value=v" -- fence read --store "$store" --key "$run"
grant t -- lease acquire --store "$store" --name "$run" --owner A --ttl 60000
expect 0 "released" -- lease release --store "$store" --name "$run" --owner A

passwords=$(cut -d: -f5 "$dir/passfile")
refused() {  # refused WHAT WORDS CONNINFO: fence write exits 2, its message has WORDS, no password
  local what="$1" words="$2"
  expect 2 "" -- fence write --store "postgres:$3" --key "$run" --token 8 --value v
  grep -q -- "$words" "$err" || fail "$what: the message does not say '$words': $(cat "$err")"
  for p in $passwords; do grep -q -- "$p" "$err" && fail "$what: a password in the message"; done
}
refused "a certificate another CA signed" "certificate verify failed" "${conninfo/tls\/ca.crt/tls/other-ca.crt}"
refused "no TLS" "pg_hba.conf" "${conninfo/sslmode=verify-full/sslmode=disable}"
refused "a wrong password" "password authentication failed" "${conninfo/passfile=$dir\/passfile/passfile=$dir/passfile-wrong}"
refused "a role without rights on coord's tables" "permission denied" "${conninfo/user=coord_app/user=coord_reader}"
expect 0 "fence=7 value=v" -- fence read --store "$store" --key "$run"   # nothing was applied
# The role and password from coordctl's options instead of the conninfo and
# its passfile (the password from a file, or COORD_STORE_PASSWORD).
bare="postgres:${conninfo/ user=coord_app/}"; bare="${bare/ passfile=$dir\/passfile/}"
pw=$(mktemp); grep ':coord_app:' "$dir/passfile" | cut -d: -f5 > "$pw"; chmod 600 "$pw"
expect 0 "fence=7 value=v" -- fence read --store "$bare" --store-user coord_app --store-password-file "$pw" --key "$run"
COORD_STORE_PASSWORD=$(cat "$pw") expect 0 "accepted" -- fence write --store "$bare" --store-user coord_app --key "$run" --token 9 --value w
COORD_STORE_PASSWORD=wrong-one expect 2 "" -- fence write --store "$bare" --store-user coord_app --key "$run" --token 10 --value w
grep -q "password authentication failed" "$err" || fail "a wrong COORD_STORE_PASSWORD: $(cat "$err")"
grep -q -- "$(cat "$pw")" "$err" && fail "the password in a message"
chmod 644 "$pw"
expect 2 "" -- fence read --store "$bare" --store-user coord_app --store-password-file "$pw" --key "$run"
grep -q "chmod 600" "$err" || fail "a password file other users can read: $(cat "$err")"
rm -f "$pw"
# The CA from --store-ca-file instead of the conninfo's sslrootcert (then
# sslmode is verify-full): the server's certificate is checked against it.
nocert="${conninfo/ sslmode=verify-full/}"; nocert="postgres:${nocert/ sslrootcert=$dir\/tls\/ca.crt/}"
expect 0 "fence=9 value=w" -- fence read --store "$nocert" --store-ca-file "$dir/tls/ca.crt" --key "$run"
expect 2 "" -- fence read --store "$nocert" --store-ca-file "$dir/tls/other-ca.crt" --key "$run"
grep -q "certificate verify failed" "$err" || fail "--store-ca-file of another CA: $(cat "$err")"
expect 2 "" -- fence read --store "sqlite:/tmp/none-$run.db" --store-user x --key k   # SQLite takes no credentials
expect 2 "" -- fence read --store "sqlite:/tmp/none-$run.db" --store-ca-file "$dir/tls/ca.crt" --key k   # nor TLS files
echo "coordctl postgres secure: $failures failure(s)"
[ "$failures" = 0 ]
