"""PyTorch's side of the GPU benchmark table (tools/gpu_check.sh): GPT training steps of lathe's
reference model (tools/torch_gpt_reference.py) in the variants a user would compare lathe with,
and causal attention alone.

  python3 tools/torch_bench_device.py CONFIG DEVICE [STEPS] [--variant V ...] [--batch N ...]
                                      [--warmup N] [--peak-tflops X] [--json]
  python3 tools/torch_bench_device.py --attention B,H,T,D DEVICE [STEPS] [--dtype bf16|f16|f32] [--json]
  e.g. python3 tools/torch_bench_device.py gpt2 cuda 10 --variant sdpa_bf16 compile_bf16 --batch 4 16

Variants (one line each, or one JSON object a line with --json; --variant all runs the four):
  naive_f32     the reference model as written (attention materialised through softmax), f32,
                TF32 off, AdamW (foreach): the model lathe implements, computed the way lathe does
  sdpa_f32      F.scaled_dot_product_attention, f32, TF32 off, fused AdamW on cuda
  sdpa_bf16     SDPA (flash attention), bf16 autocast, TF32 on, fused AdamW on cuda: nanoGPT's
                train.py with compile=False
  compile_bf16  the same under torch.compile: nanoGPT's default (compiles during the warm-up)

One step: forward, backward and AdamW (lr 3e-4, weight decay 0.1) on random tokens, timed over
STEPS (10) steps after --warmup (3) steps, synchronised before the clock is read. The peak device
memory is torch.cuda.max_memory_allocated over the timed steps (lathe bench reports its caching
allocator's peak the same way). FLOPs per token are lathe's (nn/flops.h): 6 N (N without the
position embeddings) + 12 L C T; MFU is against --peak-tflops (default 989.4, an H100 SXM's dense
BF16 peak, the figure nanoGPT and llm.c report MFU against) for every variant, f32 included.
The batch defaults to the preset's (gpt2: 4).

Attention alone: F.scaled_dot_product_attention(q, k, v, is_causal=True) forward and backward
(out.backward(g)) on q, k, v [B, H, T, D] of --dtype (bf16), the figure examples/bench_attention
gives for lathe; TFLOP/s counts 4 B H T^2 D / 2 forward and 2.5 times that backward.

The SDPA variants and --attention need torch >= 2.0 (naive_f32 also runs on 1.13, on any device).
"""
import argparse
import gc
import importlib.util
import json
import os
import time
import types

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("naive_f32", "sdpa_f32", "sdpa_bf16", "compile_bf16")


def load_reference():
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", os.path.join(HERE, "torch_gpt_reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


def need_sdpa(what):
    if not hasattr(F, "scaled_dot_product_attention"):
        raise SystemExit(f"torch_bench_device: {what} needs torch >= 2.0 "
                         f"(F.scaled_dot_product_attention); this is torch {torch.__version__}")


def sdpa_forward(self, x):
    """CausalSelfAttention.forward with SDPA in place of the materialised softmax."""
    B, T, C = x.shape
    q, k, v = self.c_attn(x).split(C, dim=2)
    q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Timer:
    """Wall time of a block of device work, synchronised on both ends."""

    def __init__(self, dev):
        self.sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def __enter__(self):
        self.sync()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.sync()
        self.seconds = time.perf_counter() - self.t0


def reset_peak(dev):
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)


def peak_mib(dev):
    return round(torch.cuda.max_memory_allocated(dev) / 2**20) if dev.type == "cuda" else None


def bench_model(ref, config, dev, variant, batch, steps, warmup, peak_tflops):
    V, T, L, H, C = ref.PRESETS[config][0]
    if variant != "naive_f32":
        need_sdpa(variant)
    bf16 = variant in ("sdpa_bf16", "compile_bf16")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = bf16
        torch.backends.cudnn.allow_tf32 = bf16
    torch.manual_seed(0)
    model, default_batch = ref.from_preset(config)  # with the preset's options (nanogpt-cpu: no biases)
    B = batch or default_batch
    model = model.to(dev)
    if variant != "naive_f32":
        for block in model.transformer.h:
            block.attn.forward = types.MethodType(sdpa_forward, block.attn)
    fused = variant != "naive_f32" and dev.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **({"fused": True} if fused else {}))
    run = torch.compile(model) if variant == "compile_bf16" else model
    x = torch.randint(0, V, (B, T), device=dev)
    y = torch.randint(0, V, (B, T), device=dev)

    def step():
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
            _, loss = run(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    with Timer(dev) as warm:
        for _ in range(warmup):
            step()
    reset_peak(dev)
    with Timer(dev) as timed:
        for _ in range(steps):
            loss = step()
    dt = timed.seconds / steps
    n_matmul = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    flops_per_token = 6 * n_matmul + 12 * L * C * T
    tok_per_s = B * T / dt
    out = {"who": "torch " + torch.__version__, "variant": variant, "config": config, "device": str(dev),
           "batch": B, "seq_len": T, "ms_per_step": round(dt * 1e3, 2), "tok_per_s": round(tok_per_s),
           "mfu": round(flops_per_token * tok_per_s / (peak_tflops * 1e12), 4), "peak_mib": peak_mib(dev),
           "warmup_s": round(warm.seconds, 1), "loss": round(float(loss), 4)}
    del run, model, opt, x, y
    if variant == "compile_bf16":
        torch._dynamo.reset()
    gc.collect()
    reset_peak(dev)
    return out


def bench_attention(shape, dev, dtype, steps, warmup):
    need_sdpa("--attention")
    B, H, T, D = shape
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, D, device=dev, dtype=dt)

    def step():
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

    for _ in range(warmup):
        step()
    reset_peak(dev)
    with Timer(dev) as timed:
        for _ in range(steps):
            step()
    ms = timed.seconds / steps * 1e3
    fwd_flops = 4 * B * H * T * T * D / 2
    return {"who": "torch " + torch.__version__, "op": "sdpa", "device": str(dev), "dtype": dtype,
            "shape": [B, H, T, D], "ms_fwd_bwd": round(ms, 4), "tflop_per_s": round(3.5 * fwd_flops / ms / 1e9, 2),
            "peak_mib": peak_mib(dev)}


def shape_arg(text):
    try:
        dims = [int(d) for d in text.split(",")]
    except ValueError:
        dims = []
    if len(dims) != 4 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"expected B,H,T,D (four positive integers), got {text!r}")
    return dims


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s CONFIG DEVICE [STEPS] [options] | %(prog)s --attention B,H,T,D DEVICE [STEPS] [options]",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("args", nargs="+", help="CONFIG DEVICE [STEPS], or DEVICE [STEPS] with --attention")
    ap.add_argument("--variant", nargs="+", default=["naive_f32"], choices=VARIANTS + ("all",))
    ap.add_argument("--batch", type=int, nargs="+", default=[0], help="sequences per step (the preset's)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (3)")
    ap.add_argument("--peak-tflops", type=float, default=989.4)
    ap.add_argument("--attention", type=shape_arg, metavar="B,H,T,D", help="time causal attention alone")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"), help="--attention's dtype (bf16)")
    ap.add_argument("--json", action="store_true", help="one JSON object a line")
    a = ap.parse_args(argv)
    args = list(a.args)
    a.config = None if a.attention is not None else args.pop(0)
    if not args or len(args) > 2:
        ap.error("give DEVICE [STEPS] with --attention, else CONFIG DEVICE [STEPS]")
    a.device = args[0]
    try:
        a.steps = int(args[1]) if len(args) > 1 else 10
    except ValueError:
        ap.error(f"STEPS must be an integer, got {args[1]!r}")
    if a.steps < 1 or a.warmup < 0 or min(a.batch) < 0 or a.peak_tflops <= 0:
        ap.error("STEPS must be at least 1, --warmup and --batch at least 0, --peak-tflops positive")
    try:
        dev = torch.device(a.device)
    except RuntimeError as e:
        ap.error(f"bad device {a.device!r}: {e}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_bench_device: no CUDA device (torch.cuda.is_available() is False)")

    if a.attention is not None:
        results = [bench_attention(a.attention, dev, a.dtype, a.steps, a.warmup)]
    else:
        ref = load_reference()
        if a.config not in ref.PRESETS:
            ap.error(f"unknown preset {a.config!r} (presets: {', '.join(ref.PRESETS)})")
        variants = VARIANTS if "all" in a.variant else a.variant
        results = []
        for variant in variants:
            for batch in a.batch:
                r = bench_model(ref, a.config, dev, variant, batch, a.steps, a.warmup, a.peak_tflops)
                results.append(r)
                print(json.dumps(r) if a.json else format_model(r, a.peak_tflops), flush=True)
        return
    for r in results:
        print(json.dumps(r) if a.json else format_attention(r), flush=True)


def format_model(r, peak):
    mem = f", peak device memory {r['peak_mib']} MiB" if r["peak_mib"] is not None else ""
    return (f"{r['who']} {r['variant']} config={r['config']} device={r['device']} batch={r['batch']}: "
            f"{r['ms_per_step']} ms/step, {r['tok_per_s']} tok/s, MFU {100 * r['mfu']:.1f}% of {peak} TFLOP/s{mem}")


def format_attention(r):
    mem = f", peak device memory {r['peak_mib']} MiB" if r["peak_mib"] is not None else ""
    return (f"{r['who']} sdpa causal {r['dtype']} {r['shape']} on {r['device']}: {r['ms_fwd_bwd']} ms forward + "
            f"backward, {r['tflop_per_s']} TFLOP/s{mem}")


if __name__ == "__main__":
    main()
