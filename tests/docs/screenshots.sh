#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Redraws docs/screenshots/*.png: the site built by mkdocs, opened from
# files by Debian's headless Chromium inside a network namespace of its own
# (no network at all: the site loads nothing from elsewhere, and nothing
# is sent anywhere). Run as root (unshare); the site is built in a scratch
# directory.
# Usage: tests/docs/screenshots.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
site=$(mktemp -d /tmp/coord-site-XXXXXX)
profile=$(mktemp -d /tmp/coord-chromium-XXXXXX)
trap 'rm -rf "$site" "$profile"' EXIT
(cd "$root" && mkdocs build --strict --quiet -d "$site")
mkdir -p "$root/docs/screenshots"
shot() {  # PAGE PNG
  unshare -n chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
    --window-size=1280,900 --screenshot="$root/docs/screenshots/$2" "file://$site/$1" >/dev/null 2>&1
  [ -s "$root/docs/screenshots/$2" ] || { echo "no screenshot of $1"; exit 1; }
}
shot index.html landing.png
shot primitives/lease/index.html primitive-lease.png
echo "docs/screenshots: landing.png, primitive-lease.png"
