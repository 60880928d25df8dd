#!/usr/bin/env python3
"""Lists the non-test Rust functions longer than a limit that do not say why.

    scripts/long_functions.py [--limit N] [DIR ...]   (default: 80 lines; registry reports benches loadgen)

STYLE asks for functions of at most ~80 lines, or a comment saying why one is
longer (issue 23 item 3). A function is counted from its `fn` line to the
closing brace at its own indentation; `tests/` folders and everything after a
`#[cfg(test)] mod` are skipped. It "says why" when the comment block right
above it (doc or plain) speaks of its length: one of the words in WHY below.
Exit status 1 when one does not, so the check can run in CI; a text scan, not
a parser: a function written on one line, or a closing brace not at the
`fn`'s indentation, is not measured.
"""

import os
import re
import sys

WHY = ("long", "lines", "table", "split")
FN = re.compile(r"^(\s*)(pub(\([^)]*\))? )?(const )?(async )?(unsafe )?fn (\w+)")
TEST_MOD = re.compile(r"\s*(pub(\([^)]*\))? )?mod ")


def functions(path):
    """(first line, length, name, says why) of each function of a file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    end = len(lines)
    for i, line in enumerate(lines[:-1]):
        if line.strip() == "#[cfg(test)]" and TEST_MOD.match(lines[i + 1]):
            end = i
            break
    for i in range(end):
        m = FN.match(lines[i])
        if not m:
            continue
        j = i
        while j < end and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= end or "{" not in lines[j]:
            continue  # a declaration without a body
        close = m.group(1) + "}"
        k = j + 1
        while k < len(lines) and lines[k].rstrip() != close:
            k += 1
        above = []
        a = i - 1
        while a >= 0 and lines[a].strip().startswith(("//", "#[")):
            above.append(lines[a].lower())
            a -= 1
        says_why = any(w in " ".join(above) for w in WHY)
        yield i + 1, k - i + 1, m.group(7), says_why


def main(argv):
    limit = 80
    if argv[:1] == ["--limit"]:
        limit, argv = int(argv[1]), argv[2:]
    roots = argv or ["registry", "reports", "benches", "loadgen"]
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("tests", "target")]
            for name in files:
                if name.endswith(".rs"):
                    path = os.path.join(folder, name)
                    for line, length, fn, why in functions(path):
                        if length > limit and not why:
                            found.append((length, f"{path}:{line}", fn))
    for length, where, fn in sorted(found, reverse=True):
        print(f"{length:5d} lines  {where}  {fn}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
