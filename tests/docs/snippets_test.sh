#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every C++ snippet of README.md and docs/ compiles. A ```cpp block is a
# whole translation unit, unless an HTML comment just above it (which
# neither a code host nor mkdocs shows) gives its context:
#   <!-- compiled in: PREFIX @@ SUFFIX -->
# the block's lines replace @@. The blocks with a context are compiled
# together, each in a namespace of its own (their #include and `using
# namespace` lines at the top of the file), and each distinct whole block
# on its own: with -fsyntax-only against include/, warnings as errors, an
# error pointing at the page's line.
# Usage: snippets_test.sh CXX SOURCE_DIR
set -u
cxx="$1"; root="$2"
work=$(mktemp -d /tmp/coord-snippets-XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$root" "$work" <<'PY' || exit 1
import os, re, sys
root, work = sys.argv[1], sys.argv[2]
pages = [os.path.join(root, 'README.md')]
for d, _, fs in os.walk(os.path.join(root, 'docs')):
    pages += sorted(os.path.join(d, f) for f in fs if f.endswith('.md'))
def hoisted(l): return l.strip().startswith(('#include', 'using namespace'))
tops, parts, whole, n = [], [], {}, 0
for page in pages:
    text = open(page, encoding='utf-8').read()
    rel = os.path.relpath(page, root)
    for m in re.finditer(r'(?:<!-- compiled in:(.*?)-->\n)?```cpp\n(.*?)```', text, re.S):
        context, block = m.group(1), m.group(2)
        line = text.count('\n', 0, m.start(2)) + 1
        n += 1
        if not context:
            whole.setdefault(block, f'{rel}:{line}')
            continue
        if '@@' not in context: sys.exit(f'{rel}:{line}: the context has no @@')
        lines = block.split('\n')
        for l in lines + context.split('\n'):
            if hoisted(l) and l.strip() not in tops: tops.append(l.strip())
        body = '\n'.join(l if not hoisted(l) else '' for l in lines)
        prefix, suffix = context.split('@@')
        prefix = '\n'.join(l for l in prefix.split('\n') if not hoisted(l))
        parts.append(f'namespace snippet_{n} {{\n{prefix}\n#line {line} "{rel}"\n{body}\n{suffix}\n}}\n')
with open(os.path.join(work, 'contexts.cpp'), 'w') as f:
    f.write('\n'.join(tops) + '\n' + ''.join(parts))
for i, (block, where) in enumerate(whole.items()):
    rel, line = where.rsplit(':', 1)
    with open(os.path.join(work, f'whole{i}.cpp'), 'w') as f:
        f.write(f'#line {line} "{rel}"\n{block}')
print(f'{n} snippets: {len(parts)} with a context in one file, {len(whole)} distinct whole ones')
PY
failures=0
for f in "$work"/*.cpp; do
  if ! out=$(cd "$root" && "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$root/include" -x c++ "$f" 2>&1); then
    echo "FAIL: a snippet does not compile:"; echo "$out" | head -30; failures=$((failures + 1))
  fi
done
echo "snippets: $failures failure(s)"
[ "$failures" = 0 ]
