#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The quick start is examples/quickstart.cpp, which the tests build and run
# (Examples.quickstart): the copies a reader meets first, the README's and
# the documentation site's landing page's (the cpp block under
# "## Quick start" of README.md and docs/index.md), must be that file, byte
# for byte.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
for page in README.md docs/index.md; do
  copy=$(awk '/^## Quick start$/ { in_section = 1; next }
              in_section && /^```cpp$/ { in_block = 1; next }
              in_block && /^```$/ { exit }
              in_block { print }' "$root/$page")
  [ -n "$copy" ] || { echo "$page: no cpp block under \"## Quick start\""; exit 1; }
  if ! diff <(printf '%s\n' "$copy") "$root/examples/quickstart.cpp"; then
    echo "$page's quick start differs from examples/quickstart.cpp (above: < $page, > the file)"
    exit 1
  fi
done
echo "the quick start of README.md and docs/index.md is examples/quickstart.cpp"
