#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every coordctl command line in a shell block of README.md and docs/ is one
# `coordctl --help` names: its command words begin a usage line of the help,
# and each of its options (--NAME, -n) is one the help lists. A line ending
# in a backslash goes on on the next; a COMMAND after ` -- ` and a comment
# after ` # ` are not coordctl's.
# Usage: coordctl_lines_test.sh COORDCTL SOURCE_DIR
set -u
ctl="$1"; root="$2"
help=$("$ctl" --help 2>&1)
[ -n "$help" ] || { echo "coordctl --help printed nothing"; exit 1; }
HELP="$help" python3 - "$root" <<'PY'
import os, re, sys
root, help = sys.argv[1], os.environ['HELP']
def words(text):  # a command's words: up to the first option, placeholder or bracket
    out = []
    for w in text.split():
        if not re.fullmatch(r'[a-z][a-z0-9|]*', w): break
        out.append(w)
    return out
commands = [words(l) for l in help.split('\n') if re.match(r'  [a-z]', l)]
known = set(re.findall(r'(?<![\w-])(--[a-z][a-z-]*|-n)\b', help))
pages = [os.path.join(root, 'README.md')]
for d, _, fs in os.walk(os.path.join(root, 'docs')):
    pages += sorted(os.path.join(d, f) for f in fs if f.endswith('.md'))
bad = lines = 0
for page in pages:
    fence, joined, start = None, '', 0
    for i, l in enumerate(open(page, encoding='utf-8'), 1):
        if l.startswith('```'):
            fence = l[3:].strip() if fence is None else None
            continue
        if fence is None or fence == 'cpp':
            continue
        if not joined: start = i
        joined += l.rstrip('\n')
        if joined.endswith('\\'):
            joined = joined[:-1] + ' '
            continue
        text, joined = joined, ''
        m = re.search(r'(?:^|[\s/])coordctl\s+([a-z].*)', text)
        if not m or text.lstrip().startswith('#'):
            continue
        rest = re.split(r'\s#\s', m.group(1))[0]
        rest = rest.split(' -- ')[0]
        command = ' '.join(words(rest))
        where = f'{os.path.relpath(page, root)}:{start}'
        lines += 1
        ok = words(rest) in commands
        if not ok:
            print(f'FAIL: {where}: coordctl {command}: no such command in coordctl --help'); bad += 1
        for opt in re.findall(r'(?<![\w-])(--[a-z][a-z-]*|-n)\b', rest):
            if opt not in known:
                print(f'FAIL: {where}: coordctl {command}: {opt} is not an option coordctl --help lists'); bad += 1
print(f'{lines} coordctl lines checked: {bad} failure(s)')
sys.exit(1 if bad else 0)
PY
