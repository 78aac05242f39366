#!/usr/bin/env python3
"""SIGKILLs a checkpointing `lathe train` at random moments and checks that no valid checkpoint is
ever lost or left damaged.

    tools/kill_soak.py --lathe build/examples/lathe [--kills 200] [--seed 1]

Each round starts `lathe train --ckpt-interval 1` on a small corpus (fresh, resumed from the run
directory, or, one round in four, resumed from an older checkpoint *file*, which moves the newer
ones aside), kills it after a random delay, then checks:
  - every checkpoint in the run directory and in its superseded-* folders reads valid (`lathe
    inspect` verifies the structure, the document and every checksum);
  - the file a round resumed from still exists;
  - once any checkpoint was written, the run directory still holds at least one.
Prints one line per failure and a summary; exit status 1 on any failure.
"""
import argparse
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def checkpoints(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "ckpt-*.safetensors")))


def all_checkpoints(run_dir):
    return checkpoints(run_dir) + sorted(glob.glob(os.path.join(run_dir, "superseded-*", "ckpt-*.safetensors")))


def valid(lathe, path):
    r = subprocess.run([lathe, "inspect", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return r.returncode == 0, r.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    lathe = os.path.abspath(args.lathe)

    work = tempfile.mkdtemp(prefix="lathe_kill_soak_")
    corpus = os.path.join(work, "corpus.txt")
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "away"]
    with open(corpus, "w") as f:
        f.write(" ".join(rng.choice(words) for _ in range(40000)))
    run_dir = os.path.join(work, "run")
    base = [lathe, "train", "--data", corpus, "--config", "tiny", "--steps", "100000", "--ckpt-interval", "1",
            "--keep-last", "3", "--eval-interval", "50", "--eval-iters", "2", "--threads", "1", "--quiet",
            "--sample-tokens", "0"]

    failures, kills, checked, older_resumes, ever_written = [], 0, 0, 0, False
    start = time.time()
    while kills < args.kills:
        have = checkpoints(run_dir)
        resumed_from = None
        if not have:
            shutil.rmtree(run_dir, ignore_errors=True)
            cmd = base + ["--out", run_dir]
        elif len(have) >= 2 and rng.random() < 0.25:
            resumed_from = rng.choice(have[:-1])  # an older file: the newer ones move aside
            older_resumes += 1
            cmd = base + ["--resume", resumed_from, "--out", run_dir]
        else:
            cmd = base + ["--resume", run_dir]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.05, 1.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        _, err = proc.communicate()
        if proc.returncode not in (-signal.SIGKILL, 0):
            failures.append(f"round {kills}: lathe exited {proc.returncode}: {err.decode().strip()[:300]}")
        for path in all_checkpoints(run_dir):
            ok, why = valid(lathe, path)
            checked += 1
            if not ok:
                failures.append(f"round {kills}: {path} is damaged: {why}")
        if resumed_from and not os.path.exists(resumed_from):
            failures.append(f"round {kills}: the checkpoint resumed from, {resumed_from}, is gone")
        ever_written = ever_written or bool(checkpoints(run_dir))
        if ever_written and not checkpoints(run_dir) and not failures:
            failures.append(f"round {kills}: the run directory lost every checkpoint")
        if failures:
            break
    for f in failures:
        print(f)
    print(f"kill_soak: {kills} SIGKILLs ({older_resumes} rounds resumed from an older file), "
          f"{checked} checkpoint reads verified, {len(failures)} failures, {time.time() - start:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
