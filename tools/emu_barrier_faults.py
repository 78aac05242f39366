#!/usr/bin/env python3
"""Proves that the CUDA emulator's race detector sees a missing barrier in the attention kernels:
removes, one at a time, each block barrier of each tiled attention kernel's key (or query) loop in
cuda/attention.cu (the one after cp_async_wait<1>(), which makes the stage other warps loaded
visible; the last one of the loop body, after which the stage is refilled; and those between, after
which a tile that one thread wrote to shared memory is read by others), rebuilds the
emulated suite, and runs the attention cases; each removal must end them with the detector's report
of a race in shared memory (cuda/emulator/README.md). cuda/attention.cu is restored after each try
(and on any exit). About 12 s a removal on two cores.

  python3 tools/emu_barrier_faults.py BUILD_DIR [--schedule warps|random:SEED] [--only KERNEL ...]

Prints one line per removal, with the report's first line, and exits 1 when any removal went
unreported.
"""
import argparse
import os
import re
import subprocess
import sys

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda", "attention.cu")
CASES = "cuda: causal attention*"
REPORT = "a race in shared memory"


def kernels(text):
    """(name, start, end) of each __global__ kernel: from its declaration to the next one's."""
    starts = [(m.group(1), m.start()) for m in re.finditer(r"__global__ void __launch_bounds__\([^)]*\)\s+(\w+)\(", text)]
    return [(name, start, starts[i + 1][1] if i + 1 < len(starts) else len(text)) for i, (name, start) in enumerate(starts)]


def barriers(text):
    """(kernel, which, offset, length) of each barrier to remove: every __syncthreads of the key (or
    query) loop's body."""
    found = []
    for name, start, end in kernels(text):
        body = text[start:end]
        loop = re.search(r"for \(int(?:64_t)? [kq]t = [^\n]*\{\n", body)
        if not loop:
            continue
        close = body.find("\n" + " " * 2 + "}\n", loop.end())  # the loop's closing brace, at its indent
        lines = [m.start() for m in re.finditer(r"[^\n]*__syncthreads\(\);[^\n]*\n", body[loop.end():close + 1])]
        for i, at in enumerate(lines):
            line_start = loop.end() + at
            line_end = body.find("\n", line_start) + 1
            before = body[body.rfind("\n", 0, line_start - 1) + 1:line_start]
            which = ("after cp_async_wait<1>" if "cp_async_wait<1>" in before
                     else "the stage refill" if i == len(lines) - 1
                     else "inside the loop")
            found.append((name, which, start + line_start, line_end - line_start))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--schedule", default="warps", help="LATHE_EMU_SCHEDULE for the runs (warps)")
    ap.add_argument("--only", nargs="+", help="kernels to try (all)")
    a = ap.parse_args()
    original = open(SOURCE).read()
    tries = [b for b in barriers(original) if not a.only or b[0] in a.only]
    if not tries:
        sys.exit("emu_barrier_faults: found no barriers to remove in cuda/attention.cu")
    env = dict(os.environ, LATHE_EMU_SCHEDULE=a.schedule)
    target = "lathe_emu_tests"
    missed = 0
    try:
        for kernel, which, offset, length in tries:
            line = original.count("\n", 0, offset) + 1
            with open(SOURCE, "w") as f:
                f.write(original[:offset] + "\n" * original.count("\n", offset, offset + length) + original[offset + length:])
            build = subprocess.run(["cmake", "--build", a.build, "--target", target], capture_output=True, text=True)
            if build.returncode != 0:
                print(f"BUILD FAILED without {kernel}'s barrier {which} (line {line}):\n{build.stdout[-2000:]}")
                missed += 1
                continue
            run = subprocess.run([os.path.join(a.build, "tests", target), f"-tc={CASES}"], env=env,
                                 capture_output=True, text=True, timeout=900)
            report = [l for l in run.stderr.splitlines() if REPORT in l]
            seen = run.returncode != 0 and bool(report)
            missed += not seen
            what = report[0] if report else (run.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"{'caught' if seen else 'MISSED'}: {kernel} without its barrier {which} (line {line}): {what}",
                  flush=True)
    finally:
        with open(SOURCE, "w") as f:
            f.write(original)
        subprocess.run(["cmake", "--build", a.build, "--target", target], capture_output=True)
    print(f"emu_barrier_faults: {len(tries) - missed} of {len(tries)} removed barriers reported as races "
          f"(schedule {a.schedule})")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
