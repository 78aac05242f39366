#!/usr/bin/env python3
"""Fails when two files of one library keep a function, constant or type of the same name to themselves.

    tools/check_unity_names.py [ROOT]     check the checkout at ROOT (default: this script's repository)
    tools/check_unity_names.py --self-test show that a repeated name fails the check

CI builds lathe as a unity build (tools/test.sh): each target's .cpp files are compiled in batches,
one file after another in a single translation unit. Names a file keeps to itself (in an anonymous
namespace, or `static` at file scope) then meet the other files' of the batch. The same name with the
same signature stops the build, but the same name with other parameters is an overload: a call in
one file can quietly pick the other file's function. The default build, one file at a time, would
never show it. So within a target every such name is unique; this check lists each repeated one.

A target here is a folder whose .cpp files form one library or program: core/ (with cpu/ and ops/),
nn/, optim/, serialize/, data/, train/ (with distributed/), ref/, cuda/'s C++ files (nvcc's .cu files are
not batched), examples/cli/, python/ (the module). The test suites compile one by one (tests/CMakeLists.txt) and are not
checked. The parse relies on lathe's layout (clang-format): an anonymous namespace opens with a line
`namespace {` and closes with `}  // namespace`, and a definition starts in the first column.
"""
import collections
import os
import re
import sys
import tempfile

TARGETS = ["core", "nn", "optim", "serialize", "data", "train", "ref", "cuda", "examples/cli", "python"]
NOT_BATCHED = {"cuda/emulator"}  # the emulator builds its own copies of cuda/, never batched

# A definition at the start of a line: a function (name, then "(") or a constant (name, then "=",
# "{" or "["). Keywords that start other lines are excluded below.
DEFINITION = re.compile(
    r"^(?:template\s*<.*>\s*)?(?:\[\[[^\]]*\]\]\s*)?(?:(?:static|inline|constexpr|const|thread_local|extern)\s+)*"
    r"[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]([A-Za-z_]\w*)\s*(\(|=|\{|\[)")
# A type defined (not only declared) at the start of a line.
TYPE_DEFINITION = re.compile(r"^(?:template\s*<.*>\s*)?(?:struct|class|union|enum(?:\s+class)?)\s+([A-Za-z_]\w*)[^;]*$")
NOT_A_DEFINITION = re.compile(r"^(struct|class|union|enum|using|typedef|namespace|return|if|for|while|switch|"
                              r"case|default|template\s*<.*>\s*(struct|class)|#|//|/\*|\*|\})\b")


def file_local_names(path):
    """The names a file defines in an anonymous namespace or as `static` at file scope. Throws
    ValueError where an anonymous namespace is left open: the parse would misread the rest."""
    names = set()
    anonymous = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.rstrip("\n")
            if stripped == "namespace {":
                anonymous += 1
                continue
            if stripped == "}  // namespace" and anonymous:
                anonymous -= 1
                continue
            if not stripped or stripped[0].isspace():
                continue
            type_match = TYPE_DEFINITION.match(stripped)
            if type_match and anonymous:
                names.add(type_match.group(1))
                continue
            if NOT_A_DEFINITION.match(stripped):
                continue
            if not anonymous and not stripped.startswith("static "):
                continue
            m = DEFINITION.match(stripped)
            if m and m.group(1) not in ("operator",):
                names.add(m.group(1))
    if anonymous:
        raise ValueError("an anonymous namespace ('namespace {') that no '}  // namespace' line closes")
    return names


def target_files(root, target):
    top = os.path.join(root, target)
    files = []
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if os.path.join(rel, d) not in NOT_BATCHED)
        if target == "examples/cli" and rel != target:
            continue
        files += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".cpp")]
    return files


def repeated(root):
    found = []
    for target in TARGETS:
        where = collections.defaultdict(list)
        for path in target_files(root, target):
            try:
                names = file_local_names(path)
            except ValueError as e:
                found.append(f"{os.path.relpath(path, root)}: {e}")
                continue
            for name in names:
                where[name].append(os.path.relpath(path, root))
        for name, paths in sorted(where.items()):
            if len(paths) > 1:
                found.append(f"{target}: '{name}' is kept to itself by each of {', '.join(paths)}")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "serialize"))
        files = {
            "serialize/a.cpp": "namespace lathe {\nnamespace {\n\nvoid run(const A& a) {\n}\n\n"
                               "constexpr const char* K = \"a\";\n\n}  // namespace\n}  // namespace lathe\n",
            "serialize/b.cpp": "namespace lathe {\nnamespace {\n\nvoid run(const B& b) {\n}\n\n"
                               "}  // namespace\n\nvoid K() {}\n}  // namespace lathe\n",
            "serialize/c.cpp": "static int run_twice(int x) { return x; }\nstruct S {\n  void run();\n};\n"
                               "namespace {\nstruct Twice;\n}  // namespace\n",
            "serialize/d.cpp": "namespace {\nint twice(int x) { return 2 * x; }\n}\n",
        }
        for rel, text in files.items():
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = repeated(root)
        want = ["serialize/d.cpp: an anonymous namespace ('namespace {') that no '}  // namespace' line closes",
                "serialize: 'run' is kept to itself by each of serialize/a.cpp, serialize/b.cpp"]
        if found != want:
            print(f"check_unity_names self-test: found {found}, want {want}")
            return 1
    print("check_unity_names self-test: the repeated file-local name and the unclosed namespace are found, "
          "and only they")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = repeated(root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} finding(s): a unity build (tools/test.sh) puts a target's files in one translation "
              "unit; give each file-local name its own spelling, or share one definition through a header")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
