#!/usr/bin/env python3
"""Kills lathe after every write it makes, one write at a time, and checks what each kill leaves.

tests/fault/kill_after.c, preloaded, counts the calls of a lathe process that change the file system
(open for writing, write, fsync, rename, link, unlink, mkdir, ... and stdio's writing calls) and
SIGKILLs the process right after the k-th. For each scenario below the driver runs the command once
to count its N calls, then once for every k in 1..N, each time from the same starting state, and
after each kill checks:

  - the state is the old one whole or the new one whole (the files a reader trusts, byte for byte,
    against the starting state and a reference run that was not killed), and
  - the next run accepts exactly one of them: the command that continues from such a state (a
    resume, a rerun, a reader) succeeds and ends where an unkilled run ends, bit for bit, and the
    command that assumes the other state is refused with one "lathe: ..." line.

Scenarios: a checkpoint save (a resumed run, --ckpt-interval 1), a fresh run's whole directory,
`tokenize --overwrite` of an existing corpus, `convert --to hf` into a new and (--overwrite) an existing
directory, `convert --to llmc` to a new file and `--to lathe --overwrite` over an existing one.

--race: two real processes of one command started at once on one new output, many times with
varied delays between them: exactly one must succeed, the other be refused with one line, and the
output be the winner's, whole.

    tools/fault_kill.py --lathe build/examples/lathe --preload build/tests/liblathe_kill_after.so
                        [--scenario NAME ...] [--race] [--rounds R]
"""

import argparse
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

LATHE = None
PRELOAD = None
TRAIN = ["--config", "tiny", "--batch", "2", "--eval-iters", "1", "--eval-interval", "0", "--sample-tokens", "0",
         "--quiet", "--threads", "1", "--lr", "3e-3"]


def run(args, env=None, cwd=None):
    return subprocess.run([LATHE] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                          timeout=300)


def must(args, cwd=None):
    r = run(args, cwd=cwd)
    if r.returncode != 0:
        raise SystemExit(f"fault_kill: setup failed: lathe {' '.join(args)}: {r.stderr.strip()}")


def preloaded(extra):
    env = dict(os.environ)
    env["LD_PRELOAD"] = PRELOAD
    # A sanitized lathe wants its runtime first among the libraries; the preloaded one is plain C.
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0:detect_leaks=0"
    env.update(extra)
    return env


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tree(path, ignore=(".lock",)):
    """What a reader trusts in a file or directory: its files' bytes by relative name (None: absent).
    Names of another process's leftovers beside it are not part of it."""
    if not os.path.lexists(path):
        return None
    if os.path.isfile(path):
        return digest(path)
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            if name in ignore:
                continue
            full = os.path.join(root, name)
            out[os.path.relpath(full, path)] = digest(full)
    return out


def one_line_refusal(r):
    lines = r.stderr.strip().splitlines()
    return r.returncode == 1 and len(lines) == 1 and lines[0].startswith("lathe: ")


class Scenario:
    """start(work) makes the starting state in `work`; command(work) is the argv that is killed;
    state(work) is what a reader trusts; check(work, which, reference) runs what comes next and
    returns an error or None, `which` saying whether the state found is 'old' or 'new', `reference`
    the directory of the run that was not killed."""

    def __init__(self, name, start, command, state, check):
        self.name, self.start, self.command, self.state, self.check = name, start, command, state, check


def scenarios(root):
    corpus = os.path.join(root, "corpus.txt")
    with open("/usr/share/games/fortunes/fortunes", "rb") as f:
        text = f.read(60000)
    with open(corpus, "wb") as f:
        f.write(text)
    base = os.path.join(root, "base")
    must(["train", "--data", corpus, "--out", base, "--steps", "2"] + TRAIN)
    other = os.path.join(root, "other")
    must(["train", "--data", corpus, "--out", other, "--steps", "1", "--seed", "7"] + TRAIN)
    tok = os.path.join(root, "tok.json")
    must(["tokenizer", "train", "--data", corpus, "--vocab-size", "300", "--out", tok])
    out = []

    # A checkpoint save: a run resumed at step 2 goes on to step 4 with a checkpoint at every step.
    def resume_start(w):
        must(["train", "--data", corpus, "--out", os.path.join(w, "run"), "--steps", "2", "--ckpt-interval", "1"] + TRAIN)

    # A run directory passes through many whole states (a checkpoint more at every step); what must
    # hold after any kill is checked by running on: every checkpoint reads, the one command that
    # continues is accepted, and it ends with the weights of the run that was never killed.
    run_state = lambda w: "a run directory"

    def same_final_model(w, reference):
        got, want = os.path.join(w, "run", "model.safetensors"), os.path.join(reference, "run", "model.safetensors")
        return None if digest(got) == digest(want) else "the run, continued, did not end with the unkilled run's weights"

    def resume_check(w, which, reference):
        d = os.path.join(w, "run")
        for name in sorted(os.listdir(d)):
            if name.startswith("ckpt-"):
                r = run(["inspect", os.path.join(d, name)])
                if r.returncode != 0:
                    return f"{name} does not read: {r.stderr.strip()}"
        fresh = run(["train", "--data", corpus, "--out", d, "--steps", "4"] + TRAIN)
        if fresh.returncode == 0 or not one_line_refusal(fresh):
            return f"a fresh run in the directory was not refused with one line: {fresh.stderr.strip()}"
        r = run(["train", "--resume", d, "--steps", "4", "--quiet", "--sample-tokens", "0"])
        if r.returncode != 0:
            return f"the resume was refused: {r.stderr.strip()}"
        return same_final_model(w, reference)

    out.append(Scenario("checkpoint", resume_start,
                        lambda w: ["train", "--resume", os.path.join(w, "run"), "--steps", "4", "--quiet",
                                   "--sample-tokens", "0"],
                        run_state, resume_check))

    # A fresh run's directory, from nothing: a kill before the first checkpoint leaves nothing a resume
    # takes, and a fresh run in the directory is accepted; after it, the resume is, and not a fresh run.
    def fresh_check(w, which, reference):
        d = os.path.join(w, "run")
        has_ckpt = os.path.isdir(d) and any(n.startswith("ckpt-") for n in os.listdir(d))
        resume = ["train", "--resume", d, "--steps", "3", "--quiet", "--sample-tokens", "0"]
        fresh = ["train", "--data", corpus, "--out", d, "--steps", "3", "--ckpt-interval", "1"] + TRAIN
        accepted, refused = (resume, fresh) if has_ckpt else (fresh, resume)
        r = run(refused)
        if r.returncode == 0 or not one_line_refusal(r):
            return f"{'a fresh run' if has_ckpt else 'a resume'} was not refused with one line: {r.stderr.strip()}"
        r = run(accepted)
        if r.returncode != 0:
            return f"{'the resume' if has_ckpt else 'a fresh run'} was refused: {r.stderr.strip()}"
        return same_final_model(w, reference)

    out.append(Scenario("fresh_run", lambda w: None,
                        lambda w: ["train", "--data", corpus, "--out", os.path.join(w, "run"), "--steps", "3",
                                   "--ckpt-interval", "1"] + TRAIN,
                        run_state, fresh_check))

    # tokenize --overwrite: a corpus of bytes replaced by one of the trained tokenizer.
    shards = lambda w: os.path.join(w, "shards")

    def tokenize_check(w, which, reference):
        r = run(["train", "--data", shards(w), "--out", os.path.join(w, "t"), "--steps", "1"] + TRAIN)
        return None if r.returncode == 0 else f"lathe train refused the corpus: {r.stderr.strip()}"

    out.append(Scenario(
        "tokenize",
        lambda w: must(["tokenize", "--tokenizer", "bytes", "--data", corpus, "--out", shards(w), "--shard-tokens", "9000"]),
        lambda w: ["tokenize", "--tokenizer", tok, "--data", corpus, "--out", shards(w), "--shard-tokens", "7000",
                   "--overwrite"],
        lambda w: tree(shards(w)), tokenize_check))

    # convert: into a new Hugging Face directory, and over an existing one (whose README stays).
    hf = lambda w: os.path.join(w, "hf")

    def hf_check(w, which, reference):
        if which == "old" and tree(hf(w)) is None:
            r = run(["convert", os.path.join(base, "model.safetensors"), hf(w), "--to", "hf"])
        else:
            r = run(["sample", "--checkpoint", hf(w), "--tokens", "4", "--prompt", "a", "--tokenizer", "bytes"])
        return None if r.returncode == 0 else f"the next command was refused: {r.stderr.strip()}"

    out.append(Scenario("convert_hf_new", lambda w: None,
                        lambda w: ["convert", os.path.join(base, "model.safetensors"), hf(w), "--to", "hf"],
                        lambda w: tree(hf(w)), hf_check))

    def hf_existing(w):
        must(["convert", os.path.join(other, "model.safetensors"), hf(w), "--to", "hf"])
        with open(os.path.join(hf(w), "README.md"), "w") as f:
            f.write("kept\n")

    out.append(Scenario("convert_hf_overwrite", hf_existing,
                        lambda w: ["convert", os.path.join(base, "model.safetensors"), hf(w), "--to", "hf", "--overwrite"],
                        lambda w: tree(hf(w)), hf_check))

    # convert to one file: a new llm.c file, and a lathe weights file over an existing one.
    binary = lambda w: os.path.join(w, "model.bin")

    def file_check(w, which, reference):
        if tree(binary(w)) is None:
            return None
        r = run(["sample", "--checkpoint", binary(w), "--tokens", "4", "--prompt", "a", "--tokenizer", "bytes"])
        return None if r.returncode == 0 else f"the file was refused: {r.stderr.strip()}"

    out.append(Scenario("convert_llmc_new", lambda w: None,
                        lambda w: ["convert", os.path.join(base, "model.safetensors"), binary(w), "--to", "llmc"],
                        lambda w: tree(binary(w)), file_check))
    weights = lambda w: os.path.join(w, "model.safetensors")

    def weights_check(w, which, reference):
        r = run(["sample", "--checkpoint", weights(w), "--tokens", "4", "--prompt", "a"])
        return None if r.returncode == 0 else f"the file was refused: {r.stderr.strip()}"

    out.append(Scenario("convert_lathe_overwrite",
                        lambda w: shutil.copy(os.path.join(other, "model.safetensors"), weights(w)),
                        lambda w: ["convert", os.path.join(base, "model.safetensors"), weights(w), "--overwrite"],
                        lambda w: tree(weights(w)), weights_check))
    return out


def kill_every_write(scenario, root):
    """Returns (kill points, failures)."""
    reference = os.path.join(root, scenario.name + ".reference")
    os.makedirs(reference)
    scenario.start(reference)
    old = scenario.state(reference)
    count_file = os.path.join(root, scenario.name + ".count")
    r = subprocess.run([LATHE] + scenario.command(reference), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, env=preloaded({"LATHE_KILL_COUNT": count_file}), timeout=300)
    if r.returncode != 0:
        return 0, [f"{scenario.name}: the command failed unkilled: {r.stderr.strip()}"]
    new = scenario.state(reference)
    with open(count_file) as f:
        n = int(f.read())
    failures = []
    for k in range(1, n + 1):
        w = os.path.join(root, f"{scenario.name}.{k}")
        os.makedirs(w)
        scenario.start(w)
        r = subprocess.run([LATHE] + scenario.command(w), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=preloaded({"LATHE_KILL_AFTER": str(k)}), timeout=300)
        if r.returncode not in (0, -signal.SIGKILL):
            failures.append(f"{scenario.name}, killed after write {k}: it failed instead: {r.stderr.strip()[:300]}")
        state = scenario.state(w)
        which = "old" if state == old else "new" if state == new else None
        if which is None:
            failures.append(f"{scenario.name}, killed after write {k} of {n}: neither the old state nor the new one "
                            f"({describe(state, old, new)})")
        else:
            problem = scenario.check(w, which, reference)
            if problem:
                failures.append(f"{scenario.name}, killed after write {k} of {n} ({which} state): {problem}")
        shutil.rmtree(w, ignore_errors=True)
    return n, failures


def describe(state, old, new):
    if not isinstance(state, dict):
        return f"found {state!r}"
    ref = new if isinstance(new, dict) else old if isinstance(old, dict) else {}
    differ = sorted(k for k in set(state) | set(ref) if state.get(k) != ref.get(k))
    return "differs from the new one in " + ", ".join(differ[:6])


def race(root, rounds, rng):
    """Two processes of one command on one new output: one wins whole, the other is refused."""
    corpus = os.path.join(root, "corpus.txt")
    base = os.path.join(root, "base", "model.safetensors")
    commands = {
        "tokenize": lambda out: ["tokenize", "--tokenizer", "bytes", "--data", corpus, "--out", out,
                                 "--shard-tokens", "5000"],
        "convert_hf": lambda out: ["convert", base, out, "--to", "hf"],
        "convert_file": lambda out: ["convert", base, out + ".safetensors"],
    }
    failures = []
    for name, command in commands.items():
        ref = os.path.join(root, f"race.{name}.reference")
        t0 = time.time()
        must(command(ref))
        duration = time.time() - t0
        target = ref + ".safetensors" if name == "convert_file" else ref
        want = tree(target)
        wins = {0: 0, 1: 0}
        for i in range(rounds):
            out = os.path.join(root, f"race.{name}.{i}")
            a = subprocess.Popen([LATHE] + command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # Half the rounds start the second within a few milliseconds, half anywhere in the first's run.
            time.sleep(rng.uniform(0, 0.005) if i % 2 else rng.uniform(0, duration * 1.2))
            b = subprocess.Popen([LATHE] + command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            results = []
            for p in (a, b):
                _, err = p.communicate(timeout=300)
                results.append(subprocess.CompletedProcess(p.args, p.returncode, "", err))
            ok = [r.returncode == 0 for r in results]
            if sum(ok) != 1:
                failures.append(f"race {name}, round {i}: {sum(ok)} of the two succeeded: "
                                + " | ".join(r.stderr.strip()[:200] for r in results))
            else:
                loser = results[ok.index(False)]
                wins[ok.index(True)] += 1
                if not one_line_refusal(loser):
                    failures.append(f"race {name}, round {i}: the loser was not refused with one line "
                                    f"(exit {loser.returncode}): {loser.stderr.strip()[:300]}")
            got_target = out + ".safetensors" if name == "convert_file" else out
            if tree(got_target) != want:
                failures.append(f"race {name}, round {i}: the output is not one whole run's")
        print(f"race {name}: {rounds} rounds, the first process won {wins[0]}, the second {wins[1]}")
    return failures


def main():
    global LATHE, PRELOAD
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--preload", required=True, help="the built tests/fault/kill_after.c")
    ap.add_argument("--scenario", action="append", help="only these (default: all)")
    ap.add_argument("--race", action="store_true", help="the two-process races instead of the scenarios")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    LATHE, PRELOAD = os.path.abspath(args.lathe), os.path.abspath(args.preload)
    root = tempfile.mkdtemp(prefix="lathe_fault_kill_")
    start = time.time()
    try:
        all_scenarios = scenarios(root)
        if args.race:
            failures = race(root, args.rounds, random.Random(args.seed))
        else:
            failures = []
            for s in all_scenarios:
                if args.scenario and s.name not in args.scenario:
                    continue
                n, f = kill_every_write(s, root)
                print(f"{s.name}: killed after each of its {n} writes; {len(f)} failures")
                failures += f
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("FAIL", f)
    print(f"fault_kill: {len(failures)} failures, {time.time() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
