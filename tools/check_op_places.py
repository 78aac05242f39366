#!/usr/bin/env python3
"""README.md's count of the places an elementwise op takes is true.

The README's paragraph "Adding an elementwise op takes N places ..., as `OP` shows ...: ...; and
... Then ..." names each place as a repository path. The check:
  1. N (a word) is the number of places the paragraph names;
  2. each place names every plain elementwise op: each op of core/op_table.h's unary list whose
     registry entry (ref/op_registry.cpp) takes one operand and no argument;
  3. no other file of the layers that keep lists (core/, cuda/, ref/, python/, tests/, tools/)
     names the example op OP, so the count is not too small.
Exits 1 naming what is off.
    tools/check_op_places.py [--self-test]
"""
import os
import re
import subprocess
import sys

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
LAYERS = ("core/", "cuda/", "ref/", "python/", "tests/", "tools/")
TEXT = re.compile(r"\.(h|cpp|cu|cuh|py|sh|txt|cmake|mjs)$")


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def the_paragraph(readme):
    start = readme.find("Adding an elementwise op takes ")
    if start < 0:
        return None
    end = readme.find("\n\n", start)
    return " ".join(readme[start:end].split())


def problems(root, readme):
    paragraph = the_paragraph(readme)
    if paragraph is None:
        return ["README.md has no paragraph \"Adding an elementwise op takes N places\""]
    m = re.match(r"Adding an elementwise op takes (\w+) places.*? as `(\w+)` shows", paragraph)
    if not m or m.group(1) not in NUMBERS:
        return ["README.md: \"Adding an elementwise op takes N places ..., as `OP` shows\" expected, N a word"]
    count, example = NUMBERS[m.group(1)], m.group(2)
    listed = paragraph[m.end():paragraph.find(" Then ", m.end())]
    places = []
    for path in re.findall(r"`([\w./]+)`", listed):
        if os.path.isfile(os.path.join(root, path)) and path not in places:
            places.append(path)
    out = []
    if len(places) != count:
        out.append(f"README.md says an elementwise op takes {m.group(1)} places but names {len(places)}: "
                   + ", ".join(places))

    table = read(root, "core/op_table.h")
    unary = re.search(r"#define LATHE_UNARY_OPS\(X\)(.*?)\n\n", table, re.S)
    unary_ops = set(re.findall(r"X\((\w+)\)", unary.group(1))) if unary else set()
    plain = set(re.findall(r'\{"(\w+)", (?:true|false), \{[^}]*\}, 1, \{\},', read(root, "ref/op_registry.cpp")))
    ops = sorted(unary_ops & plain)
    if len(ops) < 10:
        return [f"found only {len(ops)} plain elementwise ops in core/op_table.h and ref/op_registry.cpp: {ops}"]
    if example not in ops:
        out.append(f"README.md's example op {example} is no plain elementwise op of core/op_table.h and the registry")
    for place in places:
        text = read(root, place)
        for op in ops:
            if not re.search(r"\b%s\b" % op, text):
                out.append(f"{place}, a place of every elementwise op (README.md), does not name {op}")

    tracked = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    for f in tracked:
        if f.startswith(LAYERS) and TEXT.search(f) and f not in places and os.path.isfile(os.path.join(root, f)):
            if re.search(r"\b%s\b" % example, read(root, f)):
                out.append(f"{f} names {example} but is no place of README.md's list: the count is too small")
    return out


def self_test(root):
    readme = read(root, "README.md")
    fine = problems(root, readme)
    wrong_count = problems(root, readme.replace("Adding an elementwise op takes five places",
                                                "Adding an elementwise op takes six places"))
    one_less = problems(root, readme.replace("its declaration in `core/ops.h`", "its declaration in core's header"))
    if fine or not wrong_count or not one_less:
        print(f"check_op_places self-test: true README {fine}, a wrong count {wrong_count}, a place left out {one_less}")
        return 1
    print("check_op_places self-test: a wrong count and a place left out are caught, the true README passes")
    return 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test(root)
    found = problems(root, read(root, "README.md"))
    for p in found:
        print(p)
    if not found:
        print("README.md's places of an elementwise op are all there are: each names every plain elementwise op, "
              "and no other file names its example")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
