#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's quick start is examples/quickstart.cpp, which the tests build
# and run (Examples.quickstart): the README's copy (the cpp block under
# "## Quick start") must be that file, byte for byte.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
copy=$(awk '/^## Quick start$/ { in_section = 1; next }
            in_section && /^```cpp$/ { in_block = 1; next }
            in_block && /^```$/ { exit }
            in_block { print }' "$root/README.md")
[ -n "$copy" ] || { echo "README.md: no cpp block under \"## Quick start\""; exit 1; }
if ! diff <(printf '%s\n' "$copy") "$root/examples/quickstart.cpp"; then
  echo "README.md's quick start differs from examples/quickstart.cpp (above: < README, > the file)"
  exit 1
fi
echo "the README's quick start is examples/quickstart.cpp"
