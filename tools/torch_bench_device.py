"""PyTorch eager timing of the reference GPT (tools/torch_gpt_reference.py) on any device, with
achieved TFLOP/s and MFU, for issue 7's comparison `lathe bench --config gpt2 --device cuda`
against PyTorch on the same GPU. torch_gpt_reference.py itself times the CPU only.

  python3 tools/torch_bench_device.py CONFIG DEVICE [STEPS] [--peak-tflops X] [--json]
  e.g. python3 tools/torch_bench_device.py gpt2 cuda 10

One step: forward, backward and AdamW (lr 3e-4, weight decay 0.1), in f32 as lathe computes, after
2 warm-up steps, synchronised before the clock is read. FLOPs per token are lathe's
(train/flops.h): 6 N (N without the position embeddings) + 12 L C T. MFU is against
--peak-tflops (default 989.4, an H100 SXM's dense BF16 peak, as llm.c and nanoGPT report MFU).
"""
import argparse, importlib.util, json, os, time
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("device")
    ap.add_argument("steps", type=int, nargs="?", default=10)
    ap.add_argument("--peak-tflops", type=float, default=989.4)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("torch_gpt_reference", os.path.join(HERE, "torch_gpt_reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    (V, T, L, H, C), B = ref.PRESETS[a.config]
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = ref.GPT(V, T, L, H, C).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    x = torch.randint(0, V, (B, T), device=dev)
    y = torch.randint(0, V, (B, T), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step():
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    dt = (time.perf_counter() - t0) / a.steps
    n_matmul = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    flops_per_token = 6 * n_matmul + 12 * L * C * T
    tok_per_s = B * T / dt
    tflops = flops_per_token * tok_per_s / 1e12
    peak_mem = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
    out = {"torch": torch.__version__, "config": a.config, "device": str(dev), "batch": B, "seq_len": T,
           "ms_per_step": dt * 1e3, "tok_per_s": tok_per_s, "tflop_per_s": tflops,
           "mfu": tflops / a.peak_tflops, "peak_device_bytes": peak_mem}
    if a.json:
        print(json.dumps(out))
    else:
        mem = f", peak device memory {peak_mem / 2**20:.0f} MiB" if peak_mem is not None else ""
        print(f"torch {torch.__version__} config={a.config} device={dev}: {dt * 1e3:.1f} ms/step, {tok_per_s:.0f} tok/s, "
              f"{tflops:.2f} TFLOP/s, MFU {100 * tflops / a.peak_tflops:.1f}% of {a.peak_tflops} TFLOP/s{mem}")


if __name__ == "__main__":
    main()
