#!/usr/bin/env python3
"""SIGKILLs lathe at random moments and checks that what it leaves behind is never trusted when it
should not be: no valid checkpoint lost or damaged (`train`), no mixed token shard directory
accepted (`tokenize`).

    tools/kill_soak.py --lathe build/examples/lathe [--mode train|tokenize] [--kills 200] [--seed 1]

--mode train (the default). Each round starts `lathe train --ckpt-interval 1` on a small corpus (fresh, resumed from the run
directory, or, one round in four, resumed from an older checkpoint *file*, which moves the newer
ones aside), kills it after a random delay, then checks:
  - every checkpoint in the run directory and in its superseded-* folders reads valid (`lathe
    inspect` verifies the structure, the document and every checksum);
  - the file a round resumed from still exists;
  - once any checkpoint was written, the run directory still holds at least one.

--mode tokenize. Each round starts `lathe tokenize --overwrite` rewriting one shard directory,
alternating between three runs that differ in tokenizer (bytes, or one trained on the corpus) and
shard size, kills it after a random delay within its usual duration, then opens the directory as
`lathe train --data DIR --steps 1` does. Before any round has finished, the train may refuse it
with one "lathe: ..." line (there is no corpus yet); from then on it must accept it, and the
directory must be exactly one of the three runs' outputs, written whole once beforehand: the same
manifest, the same shard files with the same bytes, nothing else of lathe's. (The new corpus is
written beside the directory and swapped in whole, so a kill leaves the old one or the new one.)

Prints one line per failure and a summary; exit status 1 on any failure.
"""
import argparse
import glob
import hashlib
import json
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


def soak_train(args):
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
        whole_once = whole_once or proc.returncode == 0
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


def shard_directory(path):
    """What a reader of `path` trusts: its manifest and the bytes of its shard files, by name."""
    manifest = None
    if os.path.exists(os.path.join(path, "tokenizer.json")):
        with open(os.path.join(path, "tokenizer.json")) as f:
            manifest = json.load(f)
    shards = {}
    for name in sorted(os.listdir(path)):
        if name.startswith("shard_") and name.endswith(".bin"):
            with open(os.path.join(path, name), "rb") as f:
                shards[name] = hashlib.sha256(f.read()).hexdigest()
    return manifest, shards


def soak_tokenize(args):
    rng = random.Random(args.seed)
    lathe = os.path.abspath(args.lathe)
    work = tempfile.mkdtemp(prefix="lathe_kill_soak_tokenize_")
    corpus = os.path.join(work, "corpus")
    os.makedirs(corpus)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "away", "\n"]
    for i in range(args.documents):
        with open(os.path.join(corpus, f"doc{i:03d}.txt"), "w") as f:
            f.write(" ".join(rng.choice(words) for _ in range(20000)))
    tok = os.path.join(work, "tok.json")
    subprocess.run([lathe, "tokenizer", "train", "--data", corpus, "--vocab-size", "400", "--out", tok],
                   check=True, stdout=subprocess.DEVNULL)
    # Three runs that differ in tokenizer and shard size, so that any mix of two shows.
    runs = [("bytes", 20000), (tok, 7000), (tok, 50000)]
    command = lambda tokenizer, shard_tokens, out: [lathe, "tokenize", "--tokenizer", tokenizer, "--data", corpus,
                                                    "--out", out, "--shard-tokens", str(shard_tokens), "--threads", "1",
                                                    "--overwrite"]
    references, durations = [], []
    for i, (tokenizer, shard_tokens) in enumerate(runs):
        out = os.path.join(work, f"reference{i}")
        t0 = time.time()
        subprocess.run(command(tokenizer, shard_tokens, out), check=True, stdout=subprocess.DEVNULL)
        durations.append(time.time() - t0)
        references.append(shard_directory(out))
    data = os.path.join(work, "shards")
    opens = [lathe, "train", "--data", data, "--config", "tiny", "--steps", "1", "--batch", "2", "--eval-iters", "1",
             "--sample-tokens", "0", "--quiet", "--threads", "1"]

    failures, kills, rounds, accepted, refused = [], 0, 0, 0, 0
    whole_once = False  # a round has finished: from then on the directory always holds a whole corpus
    start = time.time()
    while kills < args.kills and not failures:
        r = rounds % len(runs)
        rounds += 1
        proc = subprocess.Popen(command(*runs[r], data), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0, durations[r] * 1.1))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        _, err = proc.communicate()
        whole_once = whole_once or proc.returncode == 0
        if proc.returncode not in (-signal.SIGKILL, 0):
            failures.append(f"round {rounds}: lathe tokenize exited {proc.returncode}: {err.decode().strip()[:300]}")
            break
        run_dir = os.path.join(work, "run")
        shutil.rmtree(run_dir, ignore_errors=True)
        t = subprocess.run(opens + ["--out", run_dir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if t.returncode == 0:
            accepted += 1
            if shard_directory(data) not in references:
                failures.append(f"round {rounds}: lathe train accepted {data}, which is not one whole run's output")
        else:
            refused += 1
            lines = t.stderr.splitlines()
            if t.returncode != 1 or len(lines) != 1 or not lines[0].startswith("lathe: "):
                failures.append(f"round {rounds}: lathe train refused {data} without one error line "
                                f"(exit {t.returncode}): {t.stderr[:300]!r}")
            elif whole_once:
                failures.append(f"round {rounds}: a kill left {data} without a whole corpus: {lines[0][:300]}")
    for f in failures:
        print(f)
    verdict = "each time as one whole run" if not failures else "not always as one whole run"
    print(f"kill_soak tokenize: {kills} SIGKILLs in {rounds} rounds; the directory was refused {refused} times and "
          f"accepted {accepted} times, {verdict}; {len(failures)} failures, {time.time() - start:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--mode", choices=["train", "tokenize"], default="train")
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--documents", type=int, default=40, help="tokenize: corpus files of about 100 KB each")
    args = ap.parse_args()
    return soak_train(args) if args.mode == "train" else soak_tokenize(args)


if __name__ == "__main__":
    sys.exit(main())
