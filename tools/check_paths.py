#!/usr/bin/env python3
"""Every repository path that a tracked file names (in a comment, a document or a script) exists.

A path is a word that starts with one of the repository's folders (core/, cuda/, nn/, ...). It
stands if it names a file or folder, a file without its extension (data/pretokenizer for .h and
.cpp), a program built from a source beside it (examples/bench_kernels), or the start of a file
name (core/ops/nn_ for the nn ops). Exits 1 naming each path that stands for nothing: files move,
and the comments that point at them are easy to forget.
    tools/check_paths.py [--self-test]
"""
import os
import re
import subprocess
import sys

FOLDERS = "core|cuda|nn|optim|serialize|data|train|ref|examples|tests|docs|tools|cmake"
PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w./-]*\w)" % FOLDERS)
TEXT = re.compile(r"(\.(h|cpp|cu|cuh|py|sh|md|txt|cmake|in)|CMakeLists\.txt)$")
# Files whose paths name nothing on purpose: their self-tests write files of these names.
EXAMPLES = {"tools/check_layers.py", "tools/check_paths.py", "tools/check_unity_names.py", "tools/gpu_check_dry.sh"}


def stands(path, tracked, prefixes):
    if path in tracked or path in prefixes:
        return True
    # A stem, a program built from one, or the start of a name.
    return any(f.startswith(path) for f in tracked)


def missing_paths(root):
    tracked = set(subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                                 check=True).stdout.split())
    folders = {os.path.dirname(f) for f in tracked}
    prefixes = set()
    for d in folders:
        while d:
            prefixes.add(d)
            d = os.path.dirname(d)
    found = []
    for f in sorted(tracked):
        if not TEXT.search(f) or f in EXAMPLES:
            continue
        try:
            lines = open(os.path.join(root, f), encoding="utf-8").read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for n, line in enumerate(lines, 1):
            for m in PATH.finditer(line):
                path = m.group(1).rstrip(".")
                if any(c in line[m.end(1):m.end(1) + 2] for c in "*<{%$") or "*" in path:
                    continue  # a pattern, not a path
                here = os.path.normpath(os.path.join(os.path.dirname(f), path))
                if not stands(path, tracked, prefixes) and not stands(here, tracked, prefixes):
                    found.append(f"{f}:{n}: {path}")
    return found


def self_test():
    """A stale path in a comment is found, and the kinds of paths that stand are not."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            "core/tensor.h": "// see core/tensor.cpp and nn/gone.h\n",
            "core/tensor.cpp": "// core/tensor (a stem), core/ten (a prefix), core/ (a folder)\n",
            "examples/bench.cpp": "// run examples/bench, a program\n",
            "docs/x.md": "core/ops/*.cpp is a pattern; data/missing.md is not\n",
        }
        for name, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        subprocess.run(["git", "init", "-q", root], check=True)
        subprocess.run(["git", "-C", root, "add", "."], check=True)
        found = missing_paths(root)
    want = ["core/tensor.h:1: nn/gone.h", "docs/x.md:1: data/missing.md"]
    if found != want:
        print(f"check_paths self-test: found {found}, want {want}")
        return 1
    print("check_paths self-test: the stale paths are found, and only they")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=True).stdout.strip()
    found = missing_paths(root)
    for line in found:
        print(f"{line} names nothing in the repository")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
