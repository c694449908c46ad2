#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coordctl's subcommands: output and exit codes (0 ok, 1 infrastructure,
# 2 usage, 3 refused by the primitive's rule).
set -u
ctl="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
store="file:$dir/state"
err="$dir/stderr"
# shellcheck source=tests/examples/coordctl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/coordctl_lib.sh"

expect 0 "fence=0 value=" -- fence read --store "$store" --key k
expect 0 "accepted" -- fence write --store "$store" --key k --token 42 --value B
expect 3 "rejected: stale fence (highest 42)" -- fence write --store "$store" --key k --token 41 --value A
expect 0 "accepted" -- fence write --store "$store" --key k --token 42 --value B2
expect 0 "fence=42 value=B2" -- fence read --store "$store" --key k

grant t1 -- lease acquire --store "$store" --name n --owner A --ttl 60000
expect 3 "held by A" -- lease acquire --store "$store" --name n --owner B --ttl 60000
expect 3 "not the holder" -- lease release --store "$store" --name n --owner B
expect 0 "renewed token=$t1" -- lease renew --store "$store" --name n --owner A
expect 0 "released" -- lease release --store "$store" --name n --owner A
grant t2 -- lease acquire --store "$store" --name n --owner B --ttl 60000
above "$t1" "$t2" "the next grant"
# --token: exactly that grant; an earlier grant of the same owner is not the holder.
expect 0 "released" -- lease release --store "$store" --name n --owner B --token "$t2"
grant t3 -- lease acquire --store "$store" --name n --owner B --ttl 60000
above "$t2" "$t3" "the next grant"
expect 3 "not the holder" -- lease renew --store "$store" --name n --owner B --token "$t2"
expect 0 "renewed token=$t3" -- lease renew --store "$store" --name n --owner B --token "$t3"
expect 2 "" -- lease renew --store "$store" --name n --owner B --token 0
expect 2 "" -- lease renew --store "$store" --name n --owner B --token x

# Snowflake: COUNT increasing IDs; runs on one state file never repeat.
ids=$("$ctl" snowflake next -n 5)
[ "$(echo "$ids" | wc -l)" = 5 ] && [ "$(echo "$ids" | sort -n | uniq)" = "$ids" ] \
  || { echo "FAIL: snowflake next -n 5 gave: $ids"; failures=$((failures + 1)); }
for run in 1 2 3; do "$ctl" snowflake next -n 100 --node 3 --state "file:$dir/sf" >> "$dir/sf_ids" || failures=$((failures + 1)); done
[ "$(wc -l < "$dir/sf_ids")" = 300 ] && [ "$(sort -n "$dir/sf_ids" | uniq)" = "$(cat "$dir/sf_ids")" ] \
  || { echo "FAIL: snowflake runs on one state file repeated or reordered IDs"; failures=$((failures + 1)); }
expect 0 "time=2026-10-13T09:00:00.000Z node=5 seq=7" -- snowflake decode $(( (1791882000000 - 1288834974657) << 22 | 5 << 12 | 7 ))
expect 2 "" -- snowflake decode 12x
expect 2 "" -- snowflake decode 9223372036854775808
expect 2 "" -- snowflake next --node 1024
expect 2 "" -- snowflake next -n 0

# Segment: four invocations at once on one store, no duplicates.
for p in 1 2 3 4; do "$ctl" segment next --store "file:$dir/seg" --tag orders -n 200 > "$dir/seg$p" & done
wait
cat "$dir"/seg[1-4] > "$dir/seg_all"
[ "$(wc -l < "$dir/seg_all")" = 800 ] && [ "$(sort -n "$dir/seg_all" | uniq | wc -l)" = 800 ] \
  || { echo "FAIL: concurrent segment next gave duplicates or too few IDs"; failures=$((failures + 1)); }
expect 0 "1" -- segment next --store "file:$dir/segx" --tag t
expect 2 "" -- segment next --store "file:$dir/segx" --tag t -n 0
expect 2 "" -- segment next --store "file:$dir/segx"

# UUIDs: COUNT canonical v7 UUIDs, strictly increasing; inspect.
uu=$("$ctl" uuid7 -n 50)
[ "$(echo "$uu" | wc -l)" = 50 ] && [ "$(echo "$uu" | LC_ALL=C sort -u)" = "$uu" ] \
  && echo "$uu" | grep -qvE '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' && false \
  || [ "$(echo "$uu" | grep -cE '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')" = 50 ] \
  || { echo "FAIL: uuid7 -n 50 gave: $uu"; failures=$((failures + 1)); }
expect 0 "version=7 variant=rfc9562 time=2022-02-22T19:22:22.000Z" -- uuid inspect 017f22e2-79b0-7cc3-98c4-dc0c0c07398f
expect 0 "version=7 variant=rfc9562 time=2022-02-22T19:22:22.000Z" -- uuid inspect urn:uuid:017F22E2-79B0-7CC3-98C4-DC0C0C07398F
expect 0 "version=4 variant=rfc9562" -- uuid inspect 919108f7-52d1-4320-9bac-f847db4148a8
expect 2 "" -- uuid inspect "{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}"
expect 2 "" -- uuid7 -n 0

# Ledger: 20 runs at once on one slot append one line; later runs replay.
slot="billing@$(date -u +%Y-%m-%dT%H:00)Z"
for p in $(seq 1 20); do "$ctl" ledger run --store "file:$dir/ledger" --slot "$slot" --effect-file "$dir/effects" > "$dir/run$p" 2>&1 & done
wait
[ "$(wc -l < "$dir/effects")" = 1 ] && [ "$(cat "$dir/effects")" = "${slot%Z}:00Z" ] \
  || { echo "FAIL: 20 concurrent ledger runs left: $(cat "$dir/effects")"; failures=$((failures + 1)); }
[ "$(cat "$dir"/run* | grep -c '^applied$')" = 1 ] \
  || { echo "FAIL: not exactly one 'applied': $(cat "$dir"/run* | sort | uniq -c)"; failures=$((failures + 1)); }
[ "$(cat "$dir"/run* | grep -cvE '^(applied|replayed|in progress)$')" = 0 ] \
  || { echo "FAIL: unexpected ledger output: $(cat "$dir"/run*)"; failures=$((failures + 1)); }
expect 0 "replayed" -- ledger run --store "file:$dir/ledger" --slot "$slot" --effect-file "$dir/effects"
expect 3 "expired" -- ledger run --store "file:$dir/ledger" --slot "billing@2020-01-01T00:00Z" --effect-file "$dir/effects"
expect 2 "" -- ledger run --store "file:$dir/ledger" --slot "billing@2026-02-30T00:00Z" --effect-file "$dir/effects"
expect 2 "" -- ledger run --store "file:$dir/ledger" --slot "$slot"

# Schedule: the next fires in UTC with their local time and offset.
sched=$("$ctl" schedule next --cron "30 2 * * *" --tz America/New_York --from 2026-03-07T00:00Z -n 3)
want="2026-03-07T07:30:00.000Z local=2026-03-07T02:30:00 offset=-05:00
2026-03-08T07:00:00.000Z local=2026-03-08T02:30:00 offset=-04:00
2026-03-09T06:30:00.000Z local=2026-03-09T02:30:00 offset=-04:00"
[ "$sched" = "$want" ] || { echo "FAIL: schedule next gave: $sched"; failures=$((failures + 1)); }
expect 2 "" -- schedule next --cron "61 * * * *" --tz UTC
# --from is included; no instant past 9999-12-31 is printed, and every one
# printed is a slot the ledger accepts.
expect 0 "2026-10-13T09:00:00.000Z local=2026-10-13T09:00:00 offset=+00:00" -- schedule next --cron "0 9 * * *" --tz UTC --from 2026-10-13T09:00Z
expect 0 "2026-10-14T09:00:00.000Z local=2026-10-14T09:00:00 offset=+00:00" -- schedule next --cron "0 9 * * *" --tz UTC --from 2026-10-13T09:00:00.001Z
edge=$("$ctl" schedule next --cron "0 0 1 * *" --tz UTC --from 9999-06-01T00:00Z -n 12 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$(echo "$edge" | grep -c '^9999-')" = 7 ] && [ "$(echo "$edge" | tail -1)" = "no further fire time (none before the end of 9999, the last year a slot can name)" ] \
  || { echo "FAIL: schedule next at the year 9999: rc=$rc $edge"; failures=$((failures + 1)); }
last=$(echo "$edge" | grep '^9999-' | tail -1 | cut -d' ' -f1)
expect 0 "granted fence=1 attempt=1" -- ledger claim --store "file:$dir/edge" --slot "edge@$last" --worker w
expect 3 "no further fire time (none before the end of 9999, the last year a slot can name)" -- schedule next --cron "0 0 1 1 *" --tz UTC --from 9999-06-01T00:00Z
expect 2 "" -- schedule next --cron "0 0 30 2 *" --tz UTC
expect 2 "" -- schedule next --cron "* * * * *" --tz Mars/Base

# JWT: sign and verify through standard input, HMAC and ES256 (a test-only key).
printf 'an-hmac-secret-of-at-least-32-bytes!\n' > "$dir/secret"
cat > "$dir/ec.pem" <<'PEM'
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgnru25Zua3CLKRAlw
H4dci8zS9KrChVwlgzAxCfudzi+hRANCAATqdlKTUvPwxMnPIzuo8vUCvaFqt//C
OTfaG2HBUQHge+j4DDFMP5MuvcgbMSLmd1ZbyFHDGK4wluuCqHq1co4V
-----END PRIVATE KEY-----
PEM
cat > "$dir/ec.pub" <<'PEM'
-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE6nZSk1Lz8MTJzyM7qPL1Ar2harf/
wjk32hthwVEB4Hvo+AwxTD+TLr3IGzEi5ndWW8hRwxiuMJbrgqh6tXKOFQ==
-----END PUBLIC KEY-----
PEM
claims='{"iss":"coordctl","aud":"api","sub":"alice","exp":253402300799}'
# jwt_expect CODE OUTPUT STDIN -- ARGS...: like expect, with standard input.
jwt_expect() {
  local want_rc="$1" want_out="$2" input="$3"; shift 4
  local out rc
  out=$(printf '%s' "$input" | "$ctl" "$@" 2>"$dir/stderr"); rc=$?
  if [ "$rc" != "$want_rc" ] || [ "$out" != "$want_out" ]; then
    echo "FAIL: coordctl $* <<< $input"
    echo "  want rc=$want_rc out='$want_out'"
    echo "  got  rc=$rc out='$out' stderr='$(cat "$dir/stderr")'"
    failures=$((failures + 1))
  fi
}
hs=$(printf '%s' "$claims" | "$ctl" jwt sign --secret-file "$dir/secret" --alg HS256 --kid k1)
jwt_expect 0 "$claims" "$hs" -- jwt verify --secret-file "$dir/secret" --alg HS256 --iss coordctl --aud api
jwt_expect 3 "rejected: wrong issuer" "$hs" -- jwt verify --secret-file "$dir/secret" --alg HS256 --iss other
jwt_expect 3 "rejected: wrong audience" "$hs" -- jwt verify --secret-file "$dir/secret" --alg HS256 --aud other
jwt_expect 3 "rejected: no key for token" "$hs" -- jwt verify --key "$dir/ec.pub" --alg ES256
jwt_expect 3 "rejected: bad signature" "${hs%?}A" -- jwt verify --secret-file "$dir/secret" --alg HS256
jwt_expect 3 "rejected: token malformed" "not.a token" -- jwt verify --secret-file "$dir/secret" --alg HS256
es=$(printf '%s' "$claims" | "$ctl" jwt sign --key "$dir/ec.pem" --alg ES256)
jwt_expect 0 "$claims" "$es" -- jwt verify --key "$dir/ec.pub" --alg ES256
cat > "$dir/jwks" <<'JWKS'
{"keys":[{"kty":"EC","crv":"P-256","kid":"k2","x":"6nZSk1Lz8MTJzyM7qPL1Ar2harf_wjk32hthwVEB4Hs","y":"6PgMMUw_ky69yBsxIuZ3VlvIUcMYrjCW64KoerVyjhU"}]}
JWKS
es_kid=$(printf '%s' "$claims" | "$ctl" jwt sign --key "$dir/ec.pem" --alg ES256 --kid k2)
jwt_expect 0 "$claims" "$es_kid" -- jwt verify --jwks "$dir/jwks"
jwt_expect 0 "$claims" "$es" -- jwt verify --jwks "$dir/jwks"  # no kid: the one ES256 key
hs_k2=$(printf '%s' "$claims" | "$ctl" jwt sign --secret-file "$dir/secret" --alg HS256 --kid k2)
jwt_expect 3 "rejected: token algorithm refused" "$hs_k2" -- jwt verify --jwks "$dir/jwks"
es_k3=$(printf '%s' "$claims" | "$ctl" jwt sign --key "$dir/ec.pem" --alg ES256 --kid k3)
jwt_expect 3 "rejected: no key for token" "$es_k3" -- jwt verify --jwks "$dir/jwks"
expired=$(printf '%s' '{"exp":1000}' | "$ctl" jwt sign --secret-file "$dir/secret" --alg HS256)
jwt_expect 3 "rejected: token expired" "$expired" -- jwt verify --secret-file "$dir/secret" --alg HS256
jwt_expect 3 "rejected: claims are not one JSON object (token JSON refused)" '{"a":1,"a":2}' -- jwt sign --secret-file "$dir/secret" --alg HS256
jwt_expect 2 "" "$hs" -- jwt verify --key "$dir/ec.pub" --alg HS256
jwt_expect 2 "" "$hs" -- jwt verify --secret-file "$dir/secret" --alg none
jwt_expect 2 "" "$claims" -- jwt sign --key "$dir/ec.pub" --alg ES256
printf 'short' > "$dir/short"
jwt_expect 2 "" "$claims" -- jwt sign --secret-file "$dir/short" --alg HS256

# Bad usage: exit 2.
expect 2 "" -- fence write --store "$store" --key k --token minus --value V
expect 2 "" -- fence write --store "$store" --key k --value V
expect 2 "" -- fence write --store "mysql:x" --key k --token 1 --value V
expect 2 "" -- lease acquire --store "$store" --name n --owner A --ttl 0
expect 2 "" -- lease acquire --store "$store" --name n --owner A --ttl 1 --color red
expect 2 "" -- nosuch thing
expect 2 "" --

# Exactly what happened: a repeated option is refused, not last-wins; an
# empty or non-UTF-8 name is refused on every store; stored strings are
# printed escaped, so an owner cannot forge an output line.
expect 2 "" -- fence write --store "$store" --key k --key j --token 50 --value V
expect 0 "fence=42 value=B2" -- fence read --store "$store" --key k
expect 2 "" -- fence write --store "$store" --key "" --token 1 --value V
expect 2 "" -- fence read --store "$store" --key ""
expect 2 "" -- fence write --store "$store" --key $'\xff\xfe' --token 1 --value V
expect 2 "" -- lease acquire --store "$store" --name n2 --owner $'A\xc0\x80' --ttl 60000
expect 2 "" -- lease acquire --store "$store" --name n2 --name n3 --owner A --ttl 60000
grant t -- lease acquire --store "$store" --name forge --owner $'x\ntoken=999' --ttl 60000
expect 3 'held by x\ntoken=999' -- lease acquire --store "$store" --name forge --owner B --ttl 60000
expect 0 "accepted" -- fence write --store "$store" --key bytes --token 1 --value $'a\x01b\\c\n'
expect 0 'fence=1 value=a\x01b\\c\n' -- fence read --store "$store" --key bytes

# ID streams: standard output carries only IDs; a refusal goes to standard
# error with exit 3.
grant t -- lease acquire --store "file:$dir/sf_held" --name snowflake/node/3 --owner other --ttl 600000
out=$("$ctl" snowflake next --node 3 --state "file:$dir/sf_held" -n 5 2>"$dir/stderr"); rc=$?
[ "$rc" = 3 ] && [ -z "$out" ] && grep -q '^refused: node 3 is held' "$dir/stderr" \
  || { echo "FAIL: a refused snowflake stream: rc=$rc stdout='$out' stderr='$(cat "$dir/stderr")'"; failures=$((failures + 1)); }

# ledger run under kill -9 at any point: the effect is idempotent per slot,
# so each slot ends with exactly one line however often a run was killed
# between the effect and the done marker (or anywhere else).
for i in $(seq 1 40); do
  ks="kill$i@2026-10-13T09:00Z"
  "$ctl" ledger run --store "file:$dir/kledger" --slot "$ks" --effect-file "$dir/keffects" --lease-ttl 1 \
    --replay-window-hours 87840 >/dev/null 2>&1 &
  pid=$!
  sleep "0.00$(( RANDOM % 10 ))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    r=$("$ctl" ledger run --store "file:$dir/kledger" --slot "$ks" --effect-file "$dir/keffects" --lease-ttl 1 \
        --replay-window-hours 87840 2>&1) && break
  done
  case "$r" in applied|replayed) ;; *) echo "FAIL: ledger run after a kill: $r"; failures=$((failures + 1)) ;; esac
done
[ "$(grep -c . "$dir/keffects")" = 40 ] && [ "$(sort "$dir/keffects" | uniq -d | wc -l)" = 0 ] \
  || { echo "FAIL: killed ledger runs left: $(sort "$dir/keffects" | uniq -c | sort -rn | head -3)"; failures=$((failures + 1)); }
# A line that a killed run left without its done marker is not appended again.
printf 'pre@2026-10-13T09:00:00Z\n' > "$dir/pre_effects"
expect 0 "applied" -- ledger run --store "file:$dir/kledger" --slot "pre@2026-10-13T09:00Z" --effect-file "$dir/pre_effects" --replay-window-hours 87840
[ "$(cat "$dir/pre_effects")" = "pre@2026-10-13T09:00:00Z" ] \
  || { echo "FAIL: the effect was applied twice: $(cat "$dir/pre_effects")"; failures=$((failures + 1)); }

# One store however it is reached; a state file that went back between two
# calls is refused, not started over (that would reissue token 1).
ln -s "$dir/idstate" "$dir/idlink"
grant t -- lease acquire --store "file:$dir/idlink" --name n --owner A --ttl 600000
expect 3 "held by A" -- lease acquire --store "file:$dir/./idstate" --name n --owner B --ttl 600000
expect 3 "held by A" -- lease acquire --store "file:$dir//idstate" --name n --owner B --ttl 600000
rm "$dir/idstate"
expect 1 "" -- lease acquire --store "file:$dir/idstate" --name n --owner B --ttl 600000
grep -q "went back" "$dir/stderr" || { echo "FAIL: a deleted state file: $(cat "$dir/stderr")"; failures=$((failures + 1)); }
# The recovery the refusal names: store init --force with floors (without
# --force: refused, 3); afterwards no token, fence acceptance or ID again.
grep -q "coordctl store init --store file:.*--force" "$err" || fail "the refusal does not name the recovery: $(cat "$err")"
out=$("$ctl" store init --store "file:$dir/idstate" --segment-floor 500 --fence-floor now --ledger-floor now); rc=$?
[ "$rc" = 3 ] && [[ "$out" == "refused: "*"--force"* ]] || fail "store init without --force: rc=$rc '$out'"
out=$("$ctl" store init --store "file:$dir/idstate" --segment-floor 500 --fence-floor now --ledger-floor now --force); rc=$?
[ "$rc" = 0 ] && [[ "$out" =~ ^initialized:\ generation\ [0-9]+$ ]] || fail "store init --force: rc=$rc '$out'"
expect 0 "501" -- segment next --store "file:$dir/idstate" --tag t
grant t2 -- lease acquire --store "file:$dir/idstate" --name n --owner B --ttl 600000
above "$t" "$t2" "a grant after the recovery"
out=$("$ctl" fence write --store "file:$dir/idstate" --key k --token "$t" --value late); rc=$?
[ "$rc" = 3 ] && [[ "$out" == "rejected: stale fence (highest "* ]] || fail "A's token after the recovery: rc=$rc '$out'"
# A new file store needs no init; one that takes over from a lost store
# states floors (generation 1) and hands out nothing below them.
expect 0 "initialized: generation 1" -- store init --store "file:$dir/fresh" --segment-floor 7 --fence-floor 9 --ledger-floor none
expect 0 "8" -- segment next --store "file:$dir/fresh" --tag t
expect 3 "rejected: stale fence (highest 9)" -- fence write --store "file:$dir/fresh" --key k --token 8 --value v
mkfifo "$dir/fifo"
out=$(timeout 20 "$ctl" fence read --store "file:$dir/fifo" --key k 2>"$dir/stderr"); rc=$?
[ "$rc" = 1 ] && grep -q "not a regular file" "$dir/stderr" \
  || { echo "FAIL: a FIFO as the store: rc=$rc $(cat "$dir/stderr")"; failures=$((failures + 1)); }

# Infrastructure: a corrupt state file or a missing directory, exit 1.
printf 'garbage that is not a coord state file........................' > "$dir/bad"
expect 1 "" -- fence read --store "file:$dir/bad" --key k
grep -q "$dir/bad" "$dir/stderr" || { echo "FAIL: corrupt-file error does not name the file"; failures=$((failures + 1)); }
expect 1 "" -- fence read --store "file:$dir/missing/dir/state" --key k

# A --store that can never work is bad input (2), not an outage (1); the
# error line shows the spec escaped. No server is needed: nothing is sent.
for spec in 'zookeeper://127.0.0.1:1/a/../b' 'zookeeper://127.0.0.1:1/a/./b' $'zookeeper://127.0.0.1:1/a\x01b' \
            'zookeeper://127.0.0.1:1:1' 'zookeeper://127.0.0.1:1/zookeeper' 'zookeeper://127.0.0.1:1/zookeeper/coord' \
            'zookeeper://ho;st:1' 'etcd://::1:2379' 'etcd://ho%st:1' 'etcd://ho\st:1' 'etcd://ho;st:1' 'redis://ho%st:1' \
            'redis://::1:6379' 'postgres:port=notaport' 'postgres:port=99999999' 'postgres:host=a port=1,70000'; do
  expect 2 "" -- fence read --store "$spec" --key k --timeout 1s
  if grep -q "$(printf '\x01')" "$dir/stderr"; then echo "FAIL: the spec was printed raw: $(cat -v "$dir/stderr")"; failures=$((failures + 1)); fi
done

# --timeout: the bound of each call. Another process holding the state's
# lock (paused, say): the command gives up at the timeout, says nothing was
# applied, exits 1.
expect 2 "" -- fence read --store "$store" --key k --timeout 0s
expect 2 "" -- fence read --store "$store" --key k --timeout 10
expect 2 "" -- fence read --store "$store" --key k --timeout 25h
expect 2 "" -- fence read --store "$store" --key k --timeout 1s --timeout 2s
expect 2 "" -- uuid7 --timeout 1s
expect 0 "fence=42 value=B2" -- fence read --store "$store" --key k --timeout 90s
( exec 9>>"$dir/state.lock"; flock -x 9; exec sleep 60 ) &  # the holder's pid is the sleep's: killing it frees the lock
holder=$!
for _ in $(seq 1 500); do flock -n "$dir/state.lock" true || break; sleep 0.01; done
out=$(timeout 20 "$ctl" fence write --store "$store" --key k --token 43 --value C --timeout 300ms 2>"$dir/stderr"); rc=$?
[ "$rc" = 1 ] && [ -z "$out" ] && grep -q "lock was not free" "$dir/stderr" && grep -q "not applied" "$dir/stderr" \
  || { echo "FAIL: a held lock with --timeout: rc=$rc out='$out' $(cat "$dir/stderr")"; failures=$((failures + 1)); }
kill "$holder"; wait "$holder" 2>/dev/null
expect 0 "fence=42 value=B2" -- fence read --store "$store" --key k --timeout 1s

# lease acquire --wait: granted when the holder lets go, or exit 3 at the deadline.
grant w1 -- lease acquire --store "file:$dir/wq" --name q --owner A --ttl 600000
( sleep 0.3; "$ctl" lease release --store "file:$dir/wq" --name q --owner A >/dev/null ) &
grant w2 -- lease acquire --store "file:$dir/wq" --name q --owner B --ttl 600000 --wait 20s
wait
above "$w1" "$w2" "the waiting acquire"
expect 3 "held by B" -- lease acquire --store "file:$dir/wq" --name q --owner C --ttl 600000 --wait 100ms
expect 2 "" -- lease acquire --store "file:$dir/wq" --name q --owner C --ttl 600000 --wait 0s
expect 2 "" -- lease acquire --store "file:$dir/wq" --name q --owner C --ttl 600000 --wait soon

if [ "$failures" -ne 0 ]; then echo "$failures coordctl check(s) failed"; exit 1; fi
echo "coordctl: all checks passed"
