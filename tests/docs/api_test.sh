#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The API reference: Debian's doxygen builds it from the headers' ///
# comments with docs/Doxyfile, where every warning fails the build (an
# undocumented public declaration is one). Then every class and struct the
# public headers declare outside a detail namespace must have its page, so
# an exclusion that hid real API would fail here too.
# Usage: api_test.sh [SOURCE_DIR]
set -u
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
command -v doxygen >/dev/null || { echo "doxygen is not installed (tests/setup.sh installs it)"; exit 1; }
out=$(mktemp -d /tmp/coord-api-XXXXXX)
trap 'rm -rf "$out"' EXIT
cd "$root" || exit 1
if ! { cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; echo "GENERATE_TAGFILE = $out/coord.tag"; } | doxygen - 2>"$out/warnings"; then
  cat "$out/warnings"; echo "FAIL: doxygen (docs/Doxyfile: warnings are errors)"; exit 1
fi
if [ -s "$out/warnings" ]; then cat "$out/warnings"; echo "FAIL: doxygen warned"; exit 1; fi
python3 - "$root" "$out/coord.tag" <<'PY'
import os, re, sys
root, tag = sys.argv[1], sys.argv[2]
have = set(re.findall(r'<compound kind="(?:class|struct)">\s*<name>([^<]+)</name>', open(tag).read()))
want = []
for d, _, fs in os.walk(os.path.join(root, 'include', 'coord')):
    if os.path.basename(d) == 'detail': continue
    for f in sorted(fs):
        path = os.path.join(d, f)
        ns, depth = [], 0
        for line in open(path, encoding='utf-8'):
            m = re.match(r'namespace ([\w:]+) \{', line)
            if m: ns.append(m.group(1)); continue
            if re.match(r'\}\s*// namespace', line): ns.pop(); continue
            m = re.match(r'(?:class|struct) (?:\[\[nodiscard\]\] )?(\w+)(?: final)?(?!::)\s*(?::[^;{]*)?\{', line)
            if not m or any(n.split('::')[-1] == 'detail' for n in ns): continue
            name = '::'.join(ns + [m.group(1)])
            if name.endswith('_adapter'): continue
            want.append((name, os.path.relpath(path, root)))
missing = [(n, p) for n, p in want if n not in have and not any(h.startswith(n + '<') for h in have)]
for n, p in missing: print(f'FAIL: {p}: {n} has no page in the API reference')
print(f'{len(want)} public classes and structs, {len(want) - len(missing)} with their page')
sys.exit(1 if missing or not want else 0)
PY
