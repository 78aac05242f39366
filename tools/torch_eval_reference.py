#!/usr/bin/env python3
"""`lathe eval`'s multiple-choice scores against PyTorch's: a byte-level model trained by lathe goes
into the reference model of tools/torch_gpt_reference.py (tools/torch_loads_lathe.py reads it), which
scores every item of a set as llm.c scores HellaSwag -- each ending as " " + ending after the
context's tokens, the sum and the mean of the ending tokens' log-probabilities, computed in float64
-- and each of lathe's per-item results (`lathe eval --out`) must match: every sum and mean within
relative 1e-4 and absolute 1e-4 (lathe's logits are f32), and the same predictions.

    /usr/bin/python3 tools/torch_eval_reference.py --lathe LATHE [--mc FILE]

Trains its own model (`lathe train --config small --steps 60`) unless given --checkpoint. The set
defaults to examples/data/english_mc.jsonl. Exit 77 (a skip for ctest) where PyTorch is not
importable.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch_eval_reference: PyTorch is not importable here; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_loads_lathe  # noqa: E402


def item_of(j):
    if "ctx" in j:
        return j["ctx"], j["endings"], int(j["label"])
    return j["context"], j["choices"], int(j["answer"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lathe", required=True)
    ap.add_argument("--mc", default=os.path.join(os.path.dirname(HERE), "examples", "data", "english_mc.jsonl"))
    ap.add_argument("--checkpoint", help="a byte-level model of lathe's (default: one trained here)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lathe_eval_ref_")
    model_path = args.checkpoint
    if model_path is None:
        run = os.path.join(tmp, "run")
        subprocess.run([args.lathe, "train", "--data", "/usr/share/games/fortunes", "--config", "small", "--steps",
                        "60", "--lr", "3e-3", "--eval-iters", "1", "--sample-tokens", "0", "--quiet", "--out", run],
                       check=True)
        model_path = os.path.join(run, "model.safetensors")
    items_path = os.path.join(tmp, "items.jsonl")
    subprocess.run([args.lathe, "eval", "--checkpoint", model_path, "--mc", args.mc, "--out", items_path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = {r["line"]: r for r in map(json.loads, open(items_path))}

    ref = torch_loads_lathe.load_reference()
    _, cfg, weights, _ = torch_loads_lathe.read_lathe(model_path)
    cfg = dict(cfg, bias=cfg.get("bias", True))
    model = torch_loads_lathe.reference_model(ref, cfg, weights)
    failures, compared = [], 0
    with open(args.mc) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip() or line_no not in got:
                continue
            context, endings, label = item_of(json.loads(line))
            ctx = list(context.encode())
            sums, means = [], []
            for ending in endings:
                end = list((" " + ending).encode())
                idx = torch.tensor([ctx + end])
                with torch.no_grad():
                    logits = model(idx)[0][0].double()
                lp = torch.log_softmax(logits, dim=-1)
                s = sum(lp[len(ctx) + t - 1, tok].item() for t, tok in enumerate(end))
                sums.append(s)
                means.append(s / len(end))
            r = got[line_no]
            for name, want, have in (("sum", sums, r["sum_logprob"]), ("mean", means, r["mean_logprob"])):
                for e, (w, h) in enumerate(zip(want, have)):
                    if abs(w - h) > 1e-4 + 1e-4 * abs(w):
                        failures.append(f"line {line_no} ending {e}: {name} {h} (lathe) against {w} (PyTorch)")
            if r["pred"] != max(range(len(sums)), key=lambda k: sums[k]) or \
                    r["pred_norm"] != max(range(len(means)), key=lambda k: means[k]):
                failures.append(f"line {line_no}: predictions differ")
            compared += 1
    for f in failures[:20]:
        print("FAIL", f)
    print(f"torch_eval_reference: {compared} items compared, {len(failures)} differences")
    return 1 if failures or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
