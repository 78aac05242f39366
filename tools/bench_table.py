#!/usr/bin/env python3
"""The benchmark table of tools/gpu_check.sh from its JSON lines: `lathe bench --json`,
tools/torch_bench_device.py --json (model variants and --attention) and examples/bench_attention
--json, in any order. One row per program and precision, a column pair per batch (tok/s, MFU),
the peak device memory at the largest batch, then the ratios the issue's acceptance names and
attention alone.

  python3 tools/bench_table.py BENCH.jsonl
"""
import json
import sys

def lathe(precision, attention_backward="split"):
    """A `lathe bench --json` line of this precision and attention backward (split when unsaid)."""
    return lambda r: (r.get("who") is None and r.get("precision") == precision
                      and r.get("attention_backward", "split") == attention_backward)


ROWS = [  # (label, how to recognise a line)
    ("lathe f32", lathe("f32")),
    ("lathe bf16", lathe("bf16")),
    ("lathe bf16, atomic attention backward", lathe("bf16", "atomic")),
    ("PyTorch naive f32", lambda r: r.get("variant") == "naive_f32"),
    ("PyTorch SDPA f32", lambda r: r.get("variant") == "sdpa_f32"),
    ("PyTorch SDPA bf16 eager", lambda r: r.get("variant") == "sdpa_bf16"),
    ("PyTorch bf16 + torch.compile", lambda r: r.get("variant") == "compile_bf16"),
]


def peak_gib(r):
    if r.get("peak_device_bytes") is not None:
        return r["peak_device_bytes"] / 2**30
    if r.get("peak_mib") is not None:
        return r["peak_mib"] / 2**10
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench_table.py BENCH.jsonl")
    lines = []
    with open(sys.argv[1]) as f:
        for text in f:
            text = text.strip()
            if text.startswith("{"):
                try:
                    lines.append(json.loads(text))
                except json.JSONDecodeError:
                    pass
    models = [r for r in lines if "tok_per_s" in r]
    batches = sorted({r["batch"] for r in models})
    table = {}
    for label, match in ROWS:
        for r in models:
            if match(r):
                table.setdefault(label, {})[r["batch"]] = r
    if models:
        config = models[0].get("config", "?")
        head = [f"{config}, T {models[0].get('seq_len', '?')}"]
        for b in batches:
            head += [f"batch {b} tok/s", "MFU"]
        head.append(f"peak memory, batch {batches[-1]}")
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        for label, _ in ROWS:
            row = table.get(label, {})
            cells = [label]
            for b in batches:
                r = row.get(b)
                cells += [f"{r['tok_per_s']:,.0f}", f"{100 * r['mfu']:.1f}%"] if r and "mfu" in r else ["-", "-"]
            last = row.get(batches[-1])
            cells.append(f"{peak_gib(last):.1f} GiB" if last and peak_gib(last) is not None else "-")
            print("| " + " | ".join(cells) + " |")
        print()
        for ours, theirs in (("lathe bf16", "PyTorch SDPA bf16 eager"), ("lathe bf16", "PyTorch bf16 + torch.compile"),
                             ("lathe bf16, atomic attention backward", "PyTorch bf16 + torch.compile"),
                             ("lathe f32", "PyTorch SDPA f32")):
            for b in batches:
                a, t = table.get(ours, {}).get(b), table.get(theirs, {}).get(b)
                if a and t:
                    mem = ""
                    if peak_gib(a) is not None and peak_gib(t) is not None:
                        mem = f"; peak memory {peak_gib(a):.1f} against {peak_gib(t):.1f} GiB"
                    print(f"{ours} / {theirs}, batch {b}: {a['tok_per_s'] / t['tok_per_s']:.2f}x tok/s{mem}")
    lathe_att = [r for r in lines if r.get("op") == "causal_attention"]
    torch_att = [r for r in lines if r.get("op") == "sdpa"]
    for r in lathe_att + torch_att:
        who = (f"lathe causal_attention ({r.get('backward', 'split')} backward)" if r in lathe_att
               else f"PyTorch SDPA ({r['who']})")
        print(f"{who} {r['dtype']} {r['shape']}: {r['ms_fwd_bwd']:.3f} ms forward + backward, "
              f"{r['tflop_per_s']} TFLOP/s")
    for r in lathe_att:
        if torch_att:
            print(f"attention, {r.get('backward', 'split')} backward: lathe / SDPA time "
                  f"{r['ms_fwd_bwd'] / torch_att[0]['ms_fwd_bwd']:.2f}x (the target: no slower than SDPA, 1.00x)")


if __name__ == "__main__":
    main()
