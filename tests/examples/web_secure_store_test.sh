#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coord_web on a Redis that takes TLS only, with client certificates, and ACL
# users only (tests/redis/redis.sh start DIR PORT secure): with the TLS files
# (--store-ca-file, --store-cert-file, --store-key-file), --store-user and the
# password from --store-password-file (or COORD_STORE_PASSWORD) a login makes a session on
# the store (303 and its cookie; /api/me names the user); with a wrong password
# coord_web does not start (exit 2: the store refused the credentials, its
# log says so); no password in the log.
#
#   tests/examples/web_secure_store_test.sh COORD_WEB REDIS_URL DIR OUT_DIR PORT
set -u
web="$1" store="$2/0" dir="$3" out="$4" port="$5"
rm -rf "$out"; mkdir -p "$out"
printf 'alice wonderland\n' > "$out/users"
printf 'not-the-password\n' > "$out/wrong"; chmod 600 "$out/wrong"
tls=(--store-ca-file "$dir/tls/ca.crt" --store-cert-file "$dir/tls/client.crt" --store-key-file "$dir/tls/client.key")
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null' EXIT
start() {  # start PASSWORD_FILE: coord_web as user coord, answering on $port
  "$web" --store "$store" --listen "127.0.0.1:$port" --users "$out/users" "${tls[@]}" \
    --store-user coord --store-password-file "$1" 2>>"$out/web.log" &
  pid=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0; sleep 0.1; done
  fail "coord_web did not answer on $port"; return 1
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; }
login() {  # prints the status; the answer's headers in $out/headers
  curl -s -o /dev/null -w '%{http_code}' -D "$out/headers" -H "Origin: http://127.0.0.1:$port" \
    --data 'user=alice&password=wonderland' "http://127.0.0.1:$port/login"
}

start "$dir/coord.password" || exit 1
[ "$(login)" = 303 ] || fail "login with the store's credentials: not 303"
cookie=$(sed -n 's/^Set-Cookie: \(__Host-sid=[A-Za-z0-9_-]*\).*/\1/Ip' "$out/headers" | tr -d '\r')
[ -n "$cookie" ] || fail "no session cookie: $(cat "$out/headers")"
me=$(curl -s -H "Cookie: $cookie" "http://127.0.0.1:$port/api/me")
[ "$me" = '{"user":"alice"}' ] || fail "/me with the session: '$me'"
stop

# A wrong password: coord_web refuses to start (the store refused the
# credentials when it was opened): exit 2, a configuration to fix.
"$web" --store "$store" --listen "127.0.0.1:$port" --users "$out/users" "${tls[@]}" \
  --store-user coord --store-password-file "$out/wrong" 2>>"$out/web.log"
rc=$?
[ "$rc" = 2 ] || fail "coord_web with a wrong store password: exit $rc, not 2"
grep -q "WRONGPASS" "$out/web.log" || fail "the log does not say the store refused the credentials: $(cat "$out/web.log")"

for p in "$dir/coord.password" "$dir/reader.password"; do
  grep -q -- "$(cat "$p")" "$out/web.log" && fail "a password in coord_web's log"
done
echo "coord_web on a secured store: $fails failure(s)"
[ "$fails" = 0 ]
