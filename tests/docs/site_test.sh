#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The documentation: the site builds with Debian's mkdocs in strict mode
# (a link to a page that is not there: a warning, which fails it) and loads
# nothing from another host, and every relative link of README.md and of the
# pages under docs/ names a file that exists and, with #ANCHOR, a heading
# of that file (as a code host and mkdocs make anchors: lower case, the
# punctuation dropped, spaces as dashes).
# Usage: site_test.sh [SOURCE_DIR]
set -u
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
command -v mkdocs >/dev/null || { echo "mkdocs is not installed (tests/setup.sh installs it)"; exit 1; }
site=$(mktemp -d /tmp/coord-site-XXXXXX)
trap 'rm -rf "$site"' EXIT
failures=0
if ! (cd "$root" && mkdocs build --strict --quiet -d "$site" 2>&1); then
  echo "FAIL: mkdocs build --strict"; failures=$((failures + 1))
fi
# The site loads nothing from elsewhere (scripts, styles, images, fonts).
if grep -rEl '(src|href)="(https?:)?//[^"]*\.(js|css|png|svg|woff2?)"|@import url\((https?:)?//' "$site" --include='*.html' --include='*.css' 2>/dev/null | head -3 | grep .; then
  echo "FAIL: the pages above load something from another host"; failures=$((failures + 1))
fi
python3 - "$root" <<'PY' || failures=$((failures + 1))
import os, re, sys
root = sys.argv[1]
def slug(h):
    h = re.sub(r'[`*_]', '', h.strip().lower())
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')
def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'): fence = not fence
        elif not fence and re.match(r'#{1,6} ', line): out.add(slug(line.lstrip('#')))
    return out
pages = [os.path.join(root, 'README.md')]
for d, _, fs in os.walk(os.path.join(root, 'docs')):
    pages += [os.path.join(d, f) for f in fs if f.endswith('.md')]
bad = 0
for page in pages:
    text, fence = [], False
    for line in open(page, encoding='utf-8'):
        if line.startswith('```'): fence = not fence
        elif not fence: text.append(line)
    for target in re.findall(r'\]\(([^)\s]+)\)', ''.join(text)):
        if re.match(r'[a-z]+:', target): continue  # http:, mailto:
        path, _, anchor = target.partition('#')
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        where = os.path.relpath(page, root)
        if not os.path.exists(full):
            print(f'FAIL: {where}: link to {target}: no such file'); bad += 1
        elif anchor and full.endswith('.md') and anchor not in anchors(full):
            print(f'FAIL: {where}: link to {target}: no such heading'); bad += 1
print(f'{len(pages)} pages, links checked: {bad} broken')
sys.exit(1 if bad else 0)
PY
echo "docs: $failures failure(s)"
[ "$failures" = 0 ]
