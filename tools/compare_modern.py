#!/usr/bin/env python3
"""The modern block against GPT-2's, as trained today: the `speedrun-small` preset (RoPE, RMSNorm
without weights, ReLU^2, QK-norm, untied head, no biases, logits soft-capped at 30) against the
`small` preset (GPT-2's block) at the same size (852k and 842k parameters), the same steps, batch,
seed and corpus, each at its own best learning rate from a short sweep. Prints one table: validation
bits per byte at equal steps (the last step) and at equal wall time (the training time of the faster
run, evaluations left out), and exits 0: it compares, it has no target.

    tools/compare_modern.py [--lathe PATH] [--data PATH] [--steps N] [--batch N] [--threads N]
                            [--baseline-lrs A,B,..] [--modern-lrs A,B,..] [--out DIR]

GPT-2's model trains with AdamW (`lathe train`'s defaults: betas 0.9, 0.99, weight decay 0.1 on
2-D weights, 100 warm-up steps, cosine decay to lr / 10, gradients clipped at 1). The modern model
trains with Muon when the program has it (`lathe train --optimizer muon`: Muon for the hidden
matrices, AdamW for the rest, as modded-nanogpt and nanochat), else with AdamW too, and the table
says which. Each run evaluates every --eval-interval steps over --eval-iters batches; a run's
training time at a step is the sum of its steps' times (metrics.jsonl's tok_per_s), so the time
spent evaluating is not counted, and the runs go one after another, taking turns, so that a busy
machine slows both alike. Python 3 standard library only; the program is built beforehand.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The two presets compared, both of block_size 128: a step is batch x 128 tokens.
MODELS = [("small", "GPT-2 block"), ("speedrun-small", "modern block")]


def parse_rates(text):
    try:
        rates = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise SystemExit(f"compare_modern: learning rates must be numbers separated by commas, got {text!r}")
    if not rates or any(r <= 0 for r in rates):
        raise SystemExit(f"compare_modern: learning rates must be positive, got {text!r}")
    return rates


def has_muon(lathe):
    out = subprocess.run([lathe, "train", "--help"], capture_output=True, text=True)
    return "muon" in out.stdout + out.stderr


def train(args, config, optimizer, lr, out):
    """Runs one training; returns its metrics records."""
    cmd = [args.lathe, "train", "--config", config, "--data", args.data, "--steps", str(args.steps),
           "--batch", str(args.batch), "--lr", repr(lr), "--optimizer", optimizer, "--seed", str(args.seed),
           "--eval-interval", str(args.eval_interval), "--eval-iters", str(args.eval_iters),
           "--sample-tokens", "0", "--quiet", "--out", out]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"compare_modern: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def curve(records, tokens_per_step):
    """[(training seconds, step, val_bpb)] at every evaluation, and the run's training seconds."""
    seconds, points = 0.0, []
    for rec in records:
        seconds += tokens_per_step / rec["tok_per_s"]
        if rec.get("val_bpb") is not None:
            points.append((seconds, rec["step"], rec["val_bpb"]))
    return points, seconds


def bpb_at(points, t):
    """Validation bits per byte at training time t: linear between the evaluations around t."""
    if t <= points[0][0]:
        return points[0][2]
    for (t0, _, b0), (t1, _, b1) in zip(points, points[1:]):
        if t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0)
    return points[-1][2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lathe", default=os.path.join(ROOT, "build", "examples", "lathe"))
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=0, help="0: lathe's default")
    p.add_argument("--eval-interval", type=int, default=50)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--baseline-lrs", default="1e-3,2e-3,4e-3,8e-3")
    p.add_argument("--modern-lrs", default=None,
                   help="default: the baseline's with AdamW; 0.005,0.01,0.02,0.04 with Muon")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "compare-modern"))
    args = p.parse_args()
    if not os.access(args.lathe, os.X_OK):
        raise SystemExit(f"compare_modern: no lathe program at {args.lathe} (build it, or pass --lathe)")

    muon = has_muon(args.lathe)
    optimizers = {"small": "adamw", "speedrun-small": "muon" if muon else "adamw"}
    rates = {"small": parse_rates(args.baseline_lrs),
             "speedrun-small": parse_rates(args.modern_lrs or ("0.005,0.01,0.02,0.04" if muon else args.baseline_lrs))}
    tokens_per_step = args.batch * 128

    # Taking turns: rate i of each model, then rate i + 1, so that load on the machine falls on both.
    runs = {m: {} for m, _ in MODELS}
    for i in range(max(len(r) for r in rates.values())):
        for model, _ in MODELS:
            if i >= len(rates[model]):
                continue
            lr = rates[model][i]
            out = os.path.join(args.out, f"{model}-lr{lr:g}")
            print(f"training {model} with {optimizers[model]} at lr {lr:g} ...", file=sys.stderr, flush=True)
            runs[model][lr] = curve(train(args, model, optimizers[model], lr, out), tokens_per_step)

    best = {m: min(runs[m], key=lambda lr: runs[m][lr][0][-1][2]) for m, _ in MODELS}
    equal_time = min(runs[m][best[m]][1] for m, _ in MODELS)

    print(f"{args.steps} steps of batch {args.batch} x 128 bytes on {args.data}, seed {args.seed}; "
          f"validation over {args.eval_iters} batches every {args.eval_interval} steps")
    print()
    print("| model | optimizer | sweep: lr -> val bpb at the last step | tuned lr | "
          f"val bpb at step {args.steps} | training time | val bpb at {equal_time:.0f} s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model, what in MODELS:
        sweep = ", ".join(f"{lr:g} -> {runs[model][lr][0][-1][2]:.3f}" for lr in rates[model])
        points, seconds = runs[model][best[model]]
        print(f"| `{model}` ({what}) | {optimizers[model]} | {sweep} | {best[model]:g} | {points[-1][2]:.3f} | "
              f"{seconds:.0f} s | {bpb_at(points, equal_time):.3f} |")
    if not muon:
        print()
        print("This lathe has no `--optimizer muon`: both models trained with AdamW.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
