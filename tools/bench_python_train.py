#!/usr/bin/env python3
"""Training from Python against the command: lathe.train and `lathe train`, the same options, in turn.

    PYTHONPATH=build/python python3 tools/bench_python_train.py [--lathe build/examples/lathe]
        [--config small] [--steps 300] [--rounds 3] [--threads 2] [--min-ratio 0.97]

Each round runs the command, then the same run through lathe.train in this process, on the same
corpus (this repository's README.md), and takes each run's median tok/s over its steps (its
metrics.jsonl, the step's own time) without the first tenth. Prints every figure, then the median
over rounds of Python / command, and exits 1 when it is below --min-ratio (issue: within 3%).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import lathe


def median_rate(run_dir):
    rates = [json.loads(line)["tok_per_s"] for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return statistics.median(rates[len(rates) // 10:])


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lathe", default=os.path.join(root, "build", "examples", "lathe"))
    ap.add_argument("--config", default="small")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-ratio", type=float, default=0.97)
    a = ap.parse_args()
    options = dict(data=os.path.join(root, "README.md"), config=a.config, steps=a.steps, eval_interval=0,
                   eval_iters=1, sample_tokens=0, threads=a.threads)
    work = tempfile.mkdtemp(prefix="lathe_bench_python_")
    ratios = []
    try:
        for r in range(a.rounds):
            cli_dir, py_dir = os.path.join(work, f"cli{r}"), os.path.join(work, f"py{r}")
            args = [a.lathe, "train", "--out", cli_dir]
            for k, v in options.items():
                args += ["--" + k.replace("_", "-"), str(v)]
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            lathe.train(out=py_dir, quiet=True, **options)
            cli, py = median_rate(cli_dir), median_rate(py_dir)
            ratios.append(py / cli)
            print(f"round {r + 1}: lathe train {cli:,.0f} tok/s, lathe.train {py:,.0f} tok/s, ratio {py / cli:.3f}")
    finally:
        shutil.rmtree(work)
    ratio = statistics.median(ratios)
    print(f"{a.config}, {a.steps} steps, {a.threads} threads, {a.rounds} rounds: Python / command {ratio:.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target >= {a.min_ratio}")
    return 0 if ratio >= a.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
