#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coord_service (examples/service/) as its README runs it: two instances on
# one store and one order database.
#   - a bad configuration exits 2 and opens nothing;
#   - one instance leads; the other answers POST /orders with 503 naming it;
#   - the leader takes orders (201: a Snowflake ID and the term's token);
#     bad orders are 400;
#   - the leader is paused (SIGSTOP) past its term: the other takes over with
#     a larger term and takes orders; resumed, the old leader answers 503 and
#     writes nothing after its successor;
#   - the tally job ran through the ledger: one row per slot, slots two
#     seconds apart, from both instances together;
#   - SIGTERM stops both with exit 0.
# Waits are polls with a 30 s liveness bound, never a timing assertion.
#
#   tests/examples/service_test.sh COORD_SERVICE STORE_URL OUT_DIR PORT
set -u
bin="$1" store="$2" out="$3" port="$4"
rm -rf "$out"; mkdir -p "$out"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
declare -A pid
trap 'for p in "${pid[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; wait 2>/dev/null' EXIT
conf() {  # conf NAME PORT NODE
  cat > "$out/$1.conf" <<CONF
# coord_service $1 (tests/examples/service_test.sh)
store = $store
listen = 127.0.0.1:$2
instance = $1
database = $out/orders.db
node = $3
term = 2
tally = */2 * * * * *
CONF
}
url() { echo "http://127.0.0.1:$(sed -n 's/^listen = 127.0.0.1://p' "$out/$1.conf")"; }
status() { curl -s "$(url "$1")/status"; }
order() { curl -s -o "$out/answer" -w '%{http_code}' --data-binary "$2" "$(url "$1")/orders"; }
until_true() {  # until_true WHAT COMMAND...: polls for 30 s
  local what="$1"; shift
  for _ in $(seq 1 300); do "$@" && return 0; sleep 0.1; done
  fail "$what (not within 30 s)"; return 1
}
leads() { status "$1" | grep -qx 'leading yes'; }
follows() { status "$1" | grep -qx 'leading no'; }

# A bad configuration: exit 2, nothing opened.
printf 'store = %s\nlisten = 127.0.0.1:%s\ninstance = x\n' "$store" "$port" > "$out/bad.conf"
"$bin" --config "$out/bad.conf" 2>"$out/bad.log"; rc=$?
[ "$rc" = 2 ] && grep -q "database is missing" "$out/bad.log" || fail "a configuration without database: exit $rc, $(cat "$out/bad.log")"
printf 'node = 5000\n' >> "$out/bad.conf"
"$bin" --config "$out/bad.conf" 2>/dev/null; rc=$?; [ "$rc" = 2 ] || fail "node 5000: exit $rc, not 2"
[ -e "$out/orders.db" ] && fail "a bad configuration created the database"

conf a "$port" 1; conf b "$((port + 1))" 2
"$bin" --config "$out/a.conf" 2>"$out/a.log" & pid[a]=$!
until_true "a leads" leads a || exit 1
"$bin" --config "$out/b.conf" 2>"$out/b.log" & pid[b]=$!
until_true "b answers and follows" follows b || exit 1
status b | grep -qx 'leader a term [0-9]*' || fail "b does not name a as the leader: $(status b)"

for item in "two apples" "a pear" "plums, ripe"; do
  [ "$(order a "$item")" = 201 ] || fail "order '$item' on the leader: $(cat "$out/answer")"
  grep -qx 'id [0-9]* token [0-9]*' "$out/answer" || fail "the answer to '$item': $(cat "$out/answer")"
done
[ "$(order b "a fig")" = 503 ] && grep -q "the leader is a" "$out/answer" || fail "an order on the follower: $(cat "$out/answer")"
[ "$(order a "")" = 400 ] || fail "an empty order is not 400"
[ "$(order a "$(head -c 300 /dev/zero | tr '\0' x)")" = 400 ] || fail "a 300-byte order is not 400"
term_a=$(status a | sed -n 's/^leader a term //p')

# The leader pauses past its term; b takes over with a larger term.
kill -STOP "${pid[a]}"
until_true "b leads while a is paused" leads b
term_b=$(status b | sed -n 's/^leader b term //p')
[ -n "$term_b" ] && [ "$term_b" -gt "$term_a" ] || fail "b's term '$term_b' is not above a's '$term_a'"
[ "$(order b "a fig")" = 201 ] || fail "an order on the new leader: $(cat "$out/answer")"
kill -CONT "${pid[a]}"
until_true "a, resumed, follows" follows a
[ "$(order a "a late plum")" = 503 ] || fail "the old leader took an order after its term: $(cat "$out/answer")"

# The orders: ids unique, tokens never go down, nothing from a after b's first.
curl -s "$(url a)/orders" > "$out/orders"
[ "$(wc -l < "$out/orders")" = 4 ] || fail "4 orders expected: $(cat "$out/orders")"
[ "$(cut -d' ' -f1 "$out/orders" | sort -u | wc -l)" = "$(wc -l < "$out/orders")" ] || fail "an ID was issued twice"
awk '$2 < last { bad = 1 } { last = $2 } $3 == "b" { seen_b = 1 } seen_b && $3 == "a" { bad = 1 } END { exit bad }' \
  "$out/orders" || fail "a token went down, or a wrote after b: $(cat "$out/orders")"

# The tally job: slots two seconds apart, one row each, from either instance.
until_true "three tallies" bash -c "[ \$(curl -s '$(url b)/tallies' | wc -l) -ge 3 ]"
curl -s "$(url b)/tallies" > "$out/tallies"
python3 - "$out/tallies" <<'PY' || fail "the tallies: $(cat "$out/tallies")"
import sys, datetime
rows = [l.split() for l in open(sys.argv[1])]
t = [datetime.datetime.strptime(r[0].split('@')[1], '%Y-%m-%dT%H:%M:%SZ') for r in rows]
assert len(set(r[0] for r in rows)) == len(rows), 'a slot twice'
assert all(b > a and (b - a).total_seconds() % 2 == 0 for a, b in zip(t, t[1:])), 'slots not two seconds apart'
assert all(r[3] in ('a', 'b') and int(r[2]) >= 1 for r in rows), 'a row without its instance or token'
PY

for n in a b; do kill "${pid[$n]}"; wait "${pid[$n]}"; rc=$?; [ "$rc" = 0 ] || fail "$n exited $rc after SIGTERM"; unset "pid[$n]"; done
echo "coord_service, two instances on $store: $fails failure(s)"
[ "$fails" = 0 ]
