#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coord_web against a hostile client, over raw TCP (bash's /dev/tcp): an
# oversized body is refused 413 before it is read, oversized headers 431, a
# body without a length 411; slow clients hold no worker (a login completes
# while they are still connected) and are disconnected once silent for
# --client-timeout; the server's memory grows little throughout.
#
#   tests/examples/web_hostile_test.sh COORD_WEB OUT_DIR PORT
set -euo pipefail
web="${1:?usage: $0 COORD_WEB OUT_DIR PORT}" out="${2:?}" port="${3:?}"
rm -rf "$out"
mkdir -p "$out"
printf 'alice wonderland\n' > "$out/users"
"$web" --store memory --listen "127.0.0.1:$port" --users "$out/users" --client-timeout 10 2>"$out/web.log" &
pid=$!
slow=()
cleanup() { kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 100); do
  bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break
  sleep 0.1
done
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# status WRITER: sends what WRITER prints on a new connection (the writer may
# be cut off when the server closes: that is the point), prints the status
# line of the answer, or "closed" when there is none.
status() {
  local line=""
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  ( "$@" >&3 ) 2>/dev/null || echo $? > "$out/writer.rc"
  IFS= read -r -t 30 line <&3 || true
  exec 3>&-
  line="${line%$'\r'}"
  echo "${line:-closed}"
}
login_request() {
  printf 'POST /login HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nOrigin: http://127.0.0.1:%s\r\n' "$port" "$port"
  printf 'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 30\r\nConnection: close\r\n\r\n'
  printf 'user=alice&password=wonderland'
}
huge_body() {
  printf 'POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 1200000000\r\n\r\n'
  head -c 67108864 /dev/zero
}
long_header() {
  printf 'GET / HTTP/1.1\r\nHost: x\r\nX-Long: '
  head -c 20000 /dev/zero | tr '\0' a
  printf '\r\n\r\n'
}
many_headers() {
  printf 'GET / HTTP/1.1\r\nHost: x\r\n'
  for i in $(seq 1 2000); do printf 'X-H%d: %096d\r\n' "$i" 0; done
  printf '\r\n'
}
chunked_body() {
  printf 'POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n'
  printf '10\r\n0123456789abcdef\r\n0\r\n\r\n'
}

# A login first, so that what a login allocates is in the memory measured
# before the hostile requests (a sanitizer's build keeps what is freed for a
# while: each login's 100,000 PBKDF2 rounds add tens of MB there).
got=$(status login_request)
[[ "$got" == "HTTP/1.1 303"* ]] || fail "a login: expected 303, got '$got'"
base_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")

# The oversized body: 413 from its length, and the server stops reading, so
# the writer of 64 MiB is cut off (EPIPE) long before the end.
rm -f "$out/writer.rc"
got=$(status huge_body)
[[ "$got" == "HTTP/1.1 413"* ]] || fail "a 1.2 GB body: expected 413, got '$got'"
[ -f "$out/writer.rc" ] || fail "a 1.2 GB body: the server read all 64 MiB sent after the refusal"
got=$(status long_header)
[[ "$got" == "HTTP/1.1 431"* ]] || fail "a 20 KB header line: expected 431, got '$got'"
got=$(status many_headers)
[[ "$got" == "HTTP/1.1 431"* ]] || fail "2000 headers: expected 431, got '$got'"
got=$(status chunked_body)
[[ "$got" == "HTTP/1.1 411"* ]] || fail "a body without Content-Length: expected 411, got '$got'"
# Memory: the peak resident size grew little (no body was buffered: the
# 1.2 GB one alone would have grown it by 64 MiB, all that was sent).
peak_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
[ $((peak_kb - base_kb)) -lt 16384 ] || fail "coord_web's peak memory grew by $((peak_kb - base_kb)) kB (over 16 MiB)"

# Ten slow clients send half a request head and stay; a login still
# completes while every one of them is connected.
for i in $(seq 1 10); do
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' >&"$fd"
  slow+=("$fd")
done
got=$(status login_request)
[[ "$got" == "HTTP/1.1 303"* ]] || fail "a login beside ten slow clients: expected 303, got '$got'"
for fd in "${slow[@]}"; do
  # Still connected and unanswered: the read times out (status over 128)
  # rather than reading a line (0) or the end of the stream (1).
  rc=0
  IFS= read -r -t 0.01 -u "$fd" line || rc=$?
  [ "$rc" -gt 128 ] || fail "a slow client was answered or disconnected before the login completed"
done
# Then each is disconnected once silent for --client-timeout (10 s): its
# read ends (end of stream) within the guard of 60 s.
for fd in "${slow[@]}"; do
  rc=0
  IFS= read -r -t 60 -u "$fd" line || rc=$?
  [ "$rc" -gt 128 ] && fail "a slow client was never disconnected"
  exec {fd}>&-
done

kill -0 "$pid" || fail "coord_web is gone"
echo "web_hostile: peak memory ${base_kb} kB before the hostile requests, ${peak_kb} kB after; log:" >&2
cat "$out/web.log" >&2
[ "$fails" = 0 ] || exit 1
echo "web_hostile: all checks passed"
