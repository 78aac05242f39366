#!/usr/bin/env python3
"""Checks that a tutorial chapter shows exactly the code and output of its program.

    tools/check_tutorial.py CHAPTER.md --program BINARY [--root ROOT]
    tools/check_tutorial.py CHAPTER.md --program BINARY --self-test

A chapter (docs/tutorial/<NN>-*.md) marks every fenced code block with an HTML comment on the
line before it:

    <!-- code: examples/tutorial/ch01_tensors.cpp#views -->
        the block equals, line for line, the region of that file between the lines
        `// [tutorial:views]` and `// [/tutorial:views]` (`# [tutorial:views]` ... in a Python
        program; the marker lines left out, the region's common indentation removed);
    <!-- code: core/op_table.h -->
        a quotation of lathe: the block appears verbatim, as whole consecutive lines, in that file;
    <!-- output: ch01_tensors -->
        the block equals the program's whole standard output;
    <!-- output: ch01_tensors#views -->
        the block equals one part of it: a program divides its output with lines `=== NAME ===`,
        and part NAME is the lines after its header up to the next header (blank lines at either
        end dropped).

A code block without a marker fails the check, and so does every relative link of the chapter
([text](path)) that names no file or folder of the repository. The program is run once, from the
repository root, with no arguments (a .py program by the Python running this check); what it
writes on stderr is not compared (chapter 9 puts the
lines that depend on a GPU there). A failing output block is reported as a unified diff.

--self-test runs the check on the chapter as it is (it must pass), then on drifted copies, each of
which must fail: a changed line in the first output block (whole output, and named part), in the
first code block (a program's region, and a quotation of lathe), a code block without a marker,
and a link to a file that does not exist. The ctest test tutorial.check_catches_drift runs it.

Exit status: 0 when everything matches, 1 when something does not (each fault on its own lines),
2 for a usage error. Python 3 standard library only.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!--\s*(code|output):\s*(\S+?)\s*-->$")
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PART_HEADER = re.compile(r"^=== (.+) ===$")


def repo_root_default():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_blocks(text):
    """[(marker kind, marker target, block text, line number of the fence)] and faults."""
    lines = text.split("\n")
    blocks, faults = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        if j == len(lines):
            faults.append(f"line {start + 1}: code block never closed")
            break
        body = "\n".join(lines[i + 1:j])
        k = start - 1
        while k >= 0 and lines[k].strip() == "":
            k -= 1
        mk = MARKER.match(lines[k].strip()) if k >= 0 else None
        if mk is None:
            faults.append(f"line {start + 1}: code block without a <!-- code: ... --> or "
                          f"<!-- output: ... --> marker on the line before it")
        else:
            blocks.append((mk.group(1), mk.group(2), body, start + 1))
        i = j + 1
    return blocks, faults


def dedent(lines):
    widths = [len(l) - len(l.lstrip(" ")) for l in lines if l.strip()]
    cut = min(widths) if widths else 0
    return [l[cut:] if l.strip() else "" for l in lines]


def region_of(path, name):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    begin = [n for n, l in enumerate(lines) if l.strip() in (f"// [tutorial:{name}]", f"# [tutorial:{name}]")]
    end = [n for n, l in enumerate(lines) if l.strip() in (f"// [/tutorial:{name}]", f"# [/tutorial:{name}]")]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        return None
    return "\n".join(dedent(lines[begin[0] + 1:end[0]]))


def contains_lines(path, block):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    want = block.split("\n")
    n = len(want)
    return any(lines[k:k + n] == want for k in range(len(lines) - n + 1))


def strip_blank_ends(lines):
    while lines and lines[0].strip() == "":
        lines = lines[1:]
    while lines and lines[-1].strip() == "":
        lines = lines[:-1]
    return lines


def output_part(stdout, part):
    lines = stdout.split("\n")
    if part is None:
        return "\n".join(strip_blank_ends(lines))
    starts = [n for n, l in enumerate(lines) if PART_HEADER.match(l) and PART_HEADER.match(l).group(1) == part]
    if len(starts) != 1:
        return None
    end = len(lines)
    for n in range(starts[0] + 1, len(lines)):
        if PART_HEADER.match(lines[n]):
            end = n
            break
    return "\n".join(strip_blank_ends(lines[starts[0] + 1:end]))


def check(chapter, program, root, out=sys.stdout):
    """Returns the list of faults (empty: the chapter matches its program)."""
    with open(chapter, encoding="utf-8") as f:
        text = f.read()
    blocks, faults = parse_blocks(text)
    where = os.path.relpath(chapter, root)

    # Links to repository files.
    for lineno, line in enumerate(text.split("\n"), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            full = os.path.normpath(os.path.join(os.path.dirname(chapter), path))
            if not os.path.exists(full):
                faults.append(f"line {lineno}: link to {target}, which does not exist")

    stdout = None
    for kind, target, body, lineno in blocks:
        if kind == "code":
            path, _, name = target.partition("#")
            full = os.path.join(root, path)
            if not os.path.isfile(full):
                faults.append(f"line {lineno}: code block from {path}, which does not exist")
                continue
            if name:
                region = region_of(full, name)
                if region is None:
                    faults.append(f"line {lineno}: {path} has no single region "
                                  f"// [tutorial:{name}] ... // [/tutorial:{name}]")
                elif region != body:
                    diff = difflib.unified_diff(region.split("\n"), body.split("\n"),
                                                f"{path}#{name}", f"{where}:{lineno}", lineterm="")
                    faults.append(f"line {lineno}: code block differs from {path}#{name}\n" + "\n".join(diff))
            elif not contains_lines(full, body):
                faults.append(f"line {lineno}: code block is not a verbatim quotation of {path}")
        else:
            if stdout is None:
                if program is None:
                    faults.append(f"line {lineno}: an output block, but no --program to run")
                    continue
                command = [sys.executable, program] if program.endswith(".py") else [program]
                run = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     timeout=600)
                if run.returncode != 0:
                    faults.append(f"{program} exited with status {run.returncode}; its stderr:\n"
                                  + run.stderr.decode("utf-8", "replace"))
                    return faults
                stdout = run.stdout.decode("utf-8", "replace")
            _, _, part = target.partition("#")
            got = output_part(stdout, part or None)
            if got is None:
                faults.append(f"line {lineno}: the program's output has no single part '=== {part} ==='")
            elif got != body:
                diff = difflib.unified_diff(body.split("\n"), got.split("\n"), f"{where}:{lineno} (shown)",
                                            f"{os.path.basename(program)} (real output)", lineterm="")
                faults.append(f"line {lineno}: output block {target} differs from the program's output\n"
                              + "\n".join(diff))
    return faults


def drifted_copies(text):
    """(what was changed, drifted text) for each kind of drift the check must catch."""
    lines = text.split("\n")
    blocks, _ = parse_blocks(text)
    copies = []

    def body_line(kind, region):
        for i in range(len(lines) - 1):
            mk = MARKER.match(lines[i].strip())
            if (mk and mk.group(1) == kind and ("#" in mk.group(2)) == region
                    and FENCE.match(lines[i + 1])):
                return i + 2  # the first line inside the block
        return None

    for kind, region, what, tail in [("output", False, "a changed output line", " (drifted)"),
                                     ("output", True, "a changed line of an output part", " (drifted)"),
                                     ("code", True, "a changed line of a program's region", "  // drifted"),
                                     ("code", False, "a changed line of a quotation of lathe", "  // drifted")]:
        n = body_line(kind, region)
        if n is not None:
            c = list(lines)
            c[n] = c[n] + tail
            copies.append((what, "\n".join(c)))
    copies.append(("a code block without a marker", text + "\n```cpp\nint unmarked = 0;\n```\n"))
    copies.append(("a link to a missing file", text + "\n[gone](../../core/no_such_file.h)\n"))
    if not blocks:
        copies.append(("(the chapter has no marked block)", None))
    return copies


def self_test(chapter, program, root):
    faults = check(chapter, program, root)
    if faults:
        print(f"self-test: the chapter itself does not pass:\n" + "\n".join(faults))
        return 1
    with open(chapter, encoding="utf-8") as f:
        text = f.read()
    status = 0
    for what, drifted in drifted_copies(text):
        if drifted is None:
            print(f"self-test: {what}")
            status = 1
            continue
        # The copy sits beside the chapter so that its relative links resolve as the original's.
        fd, path = tempfile.mkstemp(suffix=".md", prefix=".drift-", dir=os.path.dirname(chapter))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(drifted)
            found = check(path, program, root)
        finally:
            os.unlink(path)
        if found:
            print(f"self-test: {what} is caught: {found[0].splitlines()[0]}")
        else:
            print(f"self-test: {what} is NOT caught")
            status = 1
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chapter")
    ap.add_argument("--program", help="the chapter's program (needed when it shows output)")
    ap.add_argument("--root", default=repo_root_default(), help="the repository root")
    ap.add_argument("--self-test", action="store_true", help="show that drifted copies fail")
    a = ap.parse_args()
    chapter, root = os.path.abspath(a.chapter), os.path.abspath(a.root)
    program = os.path.abspath(a.program) if a.program else None
    if not os.path.isfile(chapter):
        print(f"check_tutorial: {a.chapter} does not exist", file=sys.stderr)
        return 2
    if a.self_test:
        return self_test(chapter, program, root)
    faults = check(chapter, program, root)
    for f in faults:
        print(f"{os.path.relpath(chapter, root)}: {f}")
    if not faults:
        print(f"{os.path.relpath(chapter, root)}: code, output and links match")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
