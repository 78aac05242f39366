#!/usr/bin/env python3
"""Writes the 10 MB mixed text of the tokenizer benchmark (tools/bench_tokenizer.sh) to a file:
English prose (Debian's fortunes), C code (the system's /usr/include headers), and the Unicode,
emoji and whitespace texts of tests/golden/tokenizer_texts/, interleaved in blocks of about 64 KB
and cut at 10,000,000 bytes. Valid UTF-8 throughout (tiktoken takes strings), deterministic for
a given Debian install.

  tools/make_bench_text.py OUT
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 10_000_000
BLOCK = 64 * 1024


def files_under(root, keep):
    for d, dirs, names in sorted(os.walk(root)):
        dirs.sort()
        for n in sorted(names):
            if keep(n):
                yield os.path.join(d, n)


def text_of(paths, limit):
    out, size = [], 0
    for p in paths:
        try:
            t = open(p, "rb").read().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "\0" in t:
            continue
        out.append(t)
        size += len(t)
        if size >= limit:
            break
    return "".join(out)


def main():
    prose = text_of(files_under("/usr/share/games/fortunes", lambda n: "." not in n), 5_000_000)
    code = text_of(files_under("/usr/include", lambda n: n.endswith(".h")), 3_000_000)
    golden = os.path.join(REPO, "tests", "golden", "tokenizer_texts")
    unicode = "".join(open(os.path.join(golden, n), encoding="utf-8", newline="").read()
                      for n in sorted(os.listdir(golden)) if not n.endswith(".bin"))
    sources = [prose, code, unicode * (2_000_000 // len(unicode) + 1)]
    pos = [0, 0, 0]
    out, size, i = [], 0, 0
    while size < SIZE:
        k = i % 3
        s = sources[k]
        block = s[pos[k]:pos[k] + BLOCK] or s[:BLOCK]
        pos[k] = (pos[k] + BLOCK) % len(s)
        out.append(block)
        size += len(block.encode("utf-8"))
        i += 1
    data = "".join(out).encode("utf-8")[:SIZE]
    data = data.decode("utf-8", errors="ignore").encode("utf-8")  # no character cut in half at the end
    with open(sys.argv[1], "wb") as f:
        f.write(data)


main()
