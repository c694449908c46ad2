#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# coord_web in a real browser: two instances on one SQLite store, headless
# Chromium driven by puppeteer-core (tests/examples/web_session_test.js).
# Installs what is missing as root (Debian's chromium, nodejs and npm; the
# pinned puppeteer-core from npm into a cache under /tmp), so a new machine
# needs nothing beforehand; without root and without them it fails, naming
# what to install.
#
#   tests/examples/web_session_test.sh COORD_WEB OUT_DIR BASE_PORT
#     (instances on BASE_PORT and BASE_PORT+1, the attacker's pages on +2, +3)
#   tests/examples/web_session_test.sh install
#     (only what is missing installed, as above; nothing run)
set -euo pipefail
web="${1:?usage: $0 COORD_WEB OUT_DIR BASE_PORT | install}" out="${2:-}" base="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/apt_install.sh
source "$here/../apt_install.sh"
puppeteer_version=24.10.0
npm_dir="/tmp/coord-web-npm-$puppeteer_version"
idle=6

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "web_session_test: missing ${missing[*]}: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "web_session_test: installing ${missing[*]}" >&2
  apt_install "${missing[@]}"
fi
(
  flock 8
  if [ ! -f "$npm_dir/node_modules/puppeteer-core/package.json" ]; then
    echo "web_session_test: installing puppeteer-core@$puppeteer_version from npm into $npm_dir" >&2
    mkdir -p "$npm_dir"
    npm install --no-audit --no-fund --loglevel=error --prefix "$npm_dir" "puppeteer-core@$puppeteer_version" >&2
  fi
) 8>"/tmp/coord-web-npm.lock"
[ "$web" = install ] && exit 0
[ -n "$out" ] && [ -n "$base" ] || { echo "usage: $0 COORD_WEB OUT_DIR BASE_PORT | install" >&2; exit 2; }

rm -rf "$out"
mkdir -p "$out"
printf 'alice wonderland\nbob builder\ncarol singer\n' > "$out/users"
store="sqlite:$out/sessions.db"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for i in 0 1; do
  "$web" --store "$store" --listen "127.0.0.1:$((base + i))" --users "$out/users" --idle-timeout "$idle" \
    --absolute-timeout 3600 2>"$out/instance$i.log" &
  pids+=($!)
done
for i in 0 1; do
  for _ in $(seq 1 100); do
    bash -c "exec 3<>/dev/tcp/127.0.0.1/$((base + i))" 2>/dev/null && break
    sleep 0.1
  done
done

rc=0
PUPPETEER_DIR="$npm_dir" CHROMIUM="$(command -v chromium)" A="http://127.0.0.1:$base" B="http://127.0.0.1:$((base + 1))" \
  EVIL_PORT="$((base + 2))" IDLE_SECONDS="$idle" OUT="$out" node "$here/web_session_test.js" || rc=$?
if [ "$rc" != 0 ]; then
  echo "--- instance logs" >&2
  tail -n 30 "$out"/instance*.log >&2 || true
fi
# The passwords never reach the logs.
if grep -q -e wonderland -e builder -e singer "$out"/instance*.log; then
  echo "FAIL: a password is in an instance's log" >&2
  rc=1
fi
[ -f "$out/signed_in.png" ] || { echo "FAIL: no screenshot" >&2; rc=1; }
exit "$rc"
