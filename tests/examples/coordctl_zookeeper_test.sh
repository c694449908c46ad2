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
# lease acquire --wait (a line of places under the lease's record): a queued
# waiter SIGKILLed stops blocking the line when its place lapses; the next
# waiter is served when the holder lets go; a deadline passed is exit 3.
# The places are counted with kazoo (Debian's python3-kazoo).
hosts=${store#zookeeper://}; root="/${hosts#*/}"; hosts=${hosts%%/*}
in_line() {
  /usr/bin/python3 - "$hosts" "$root" <<'PY'
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
print(sum(len([c for c in zk.get_children(sys.argv[2] + "/lease/" + n) if c.startswith("p-")])
          for n in zk.get_children(sys.argv[2] + "/lease")))
zk.stop()
PY
}
until_in_line() { for _ in $(seq 100); do [ "$(in_line)" -ge "$1" ] && return 0; sleep 0.1; done; fail "never $1 place(s) in line"; }
grant w1 -- lease acquire --store "$store" --name "w$run" --owner A --ttl 600000
"$ctl" lease acquire --store "$store" --name "w$run" --owner K --ttl 600000 --wait 60s >/dev/null 2>&1 &
killed=$!
until_in_line 1
"$ctl" lease acquire --store "$store" --name "w$run" --owner B --ttl 600000 --wait 30s > "$err.b" 2>&1 &
b=$!
until_in_line 2
kill -KILL "$killed"; wait "$killed" 2>/dev/null
expect 0 "released" -- lease release --store "$store" --name "w$run" --owner A
wait "$b"; rc=$?
w2=$(cat "$err.b"); rm -f "$err.b"
[ "$rc" = 0 ] || fail "the waiter behind a SIGKILLed one: rc=$rc '$w2'"
above "$w1" "${w2#token=}" "the waiting acquire"
expect 3 "held by B" -- lease acquire --store "$store" --name "w$run" --owner C --ttl 600000 --wait 100ms
[ "$(in_line)" = 0 ] || fail "a served waiter, a SIGKILLed one and one that gave up left places in line: $(in_line)"
# Digest credentials from a file (mode 600), never on the command line: a
# root initialized with them is theirs to change (kazoo without them cannot
# delete the fence); coordctl without them, with a wrong password or with a
# file other users can read is a configuration error (2), the password in no
# message.
secret=$(mktemp); wrong=$(mktemp); open_file=$(mktemp)
printf 'coord:pw-%s\n' "$run" > "$secret"; printf 'coord:nope\n' > "$wrong"; cp "$secret" "$open_file"
chmod 600 "$secret" "$wrong"; chmod 644 "$open_file"
sec="zookeeper://$hosts/coordctl-sec$$"
out=$("$ctl" store init --store "$sec?digest_file=$secret" --segment-floor 0 --fence-floor 0 --ledger-floor none 2>"$err")
[[ "$out" =~ ^initialized: ]] || fail "store init with digest credentials: '$out' $(cat "$err")"
expect 0 "accepted" -- fence write --store "$sec?digest_file=$secret" --key k --token 7 --value v
/usr/bin/python3 - "$hosts" "/coordctl-sec$$" <<'PY' || fail "kazoo without the credentials deleted coord's fence"
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
try:
    zk.delete(sys.argv[2] + "/fence/n-k"); sys.exit(1)
except NoAuthError:
    pass
finally:
    zk.stop()
PY
expect 3 "rejected: stale fence (highest 7)" -- fence write --store "$sec?digest_file=$secret" --key k --token 6 --value late
for bad in "$sec" "$sec?digest_file=$wrong" "$sec?digest_file=$open_file"; do
  expect 2 "" -- fence write --store "$bad" --key k --token 8 --value v
  grep -q "pw-$run" "$err" && fail "the password in a message: $(cat "$err")"
done
grep -q "chmod 600" "$err" || fail "a secret's file other users can read: $(cat "$err")"
expect 0 "fence=7 value=v" -- fence read --store "$sec?digest_file=$secret" --key k
# The same identity from coordctl's --store-user and --store-password-file,
# or COORD_STORE_PASSWORD.
cut -d: -f2 "$secret" > "$secret.pw"; chmod 600 "$secret.pw"
expect 0 "fence=7 value=v" -- fence read --store "$sec" --store-user coord --store-password-file "$secret.pw" --key k
COORD_STORE_PASSWORD=$(cat "$secret.pw") expect 0 "accepted" -- fence write --store "$sec" --store-user coord --key k --token 9 --value w
COORD_STORE_PASSWORD=nope expect 2 "" -- fence write --store "$sec" --store-user coord --key k --token 10 --value w
expect 2 "" -- fence read --store "$sec" --store-user coord --key k   # a user without a password
rm -f "$secret" "$wrong" "$open_file" "$secret.pw"
expect 2 "" -- fence read --store "zookeeper://127.0.0.1" --key k
expect 2 "" -- fence read --store "zookeeper://127.0.0.1:1//x" --key k
expect 1 "" -- fence read --store "zookeeper://127.0.0.1:1" --key k --timeout 1s
rm -f $err
if [ "$failures" != 0 ]; then echo "$failures coordctl zookeeper check(s) failed"; exit 1; fi
echo "coordctl zookeeper: all checks passed"
