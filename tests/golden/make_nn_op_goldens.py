"""Golden values of the op test registry (tests/test_op_cases.cpp) for the nn ops: matmul, softmax,
log_softmax, layer_norm, embedding, cross_entropy and the fused classifier computed by PyTorch in f32, with the gradients
of sum(out * gout); and one Adam and one AdamW step of torch.optim from a given state.

    /usr/bin/python3 tests/golden/make_nn_op_goldens.py

Writes nn_ops.safetensors next to this script (golden_safetensors.py: the one golden format).

Names are "<case>.<tensor>": inputs (a, b, x, weight, bias, idx, targets, ...), "out" (the
forward result), "gout" (the weight of each output in the scalar objective) and "grad_<input>".
Shapes are small, and some rows are longer than 16 to exercise the kernels' vector lanes.
"""
import os

import torch
import torch.nn.functional as F

import golden_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20240611)

tensors = {}  # name -> tensor, in insertion order


def put(case, name, t):
    tensors[f"{case}.{name}"] = t.detach().clone().contiguous()


def run(case, fn, inputs, **extra):
    """Stores the inputs, fn(*inputs), a random gout and the gradients of sum(out * gout)."""
    leaves = {}
    for name, t in inputs.items():
        if t.is_floating_point():
            t = t.clone().requires_grad_(True)
        leaves[name] = t
        put(case, name, t)
    for name, t in extra.items():
        put(case, name, t)
    out = fn(**leaves)
    gout = torch.randn(out.shape)
    (out * gout).sum().backward()
    put(case, "out", out)
    put(case, "gout", gout)
    for name, t in leaves.items():
        if t.is_floating_point():
            put(case, f"grad_{name}", t.grad)


r = torch.randn

# ---- matmul ----
run("matmul_2d", lambda a, b: a @ b, {"a": r(3, 4), "b": r(4, 5)})
run("matmul_bcast", lambda a, b: a @ b, {"a": r(2, 1, 3, 4), "b": r(3, 4, 2)})
# A linear layer: x @ W^T with W stored (out, in); the test passes W.t(), a transposed view.
run("matmul_linear", lambda x, w: x @ w.t(), {"x": r(2, 3, 20), "w": r(17, 20)})
run("matmul_vec_left", lambda a, b: a @ b, {"a": r(4), "b": r(2, 4, 3)})
run("matmul_vec_right", lambda a, b: a @ b, {"a": r(3, 4), "b": r(4)})
run("matmul_dot", lambda a, b: a @ b, {"a": r(5), "b": r(5)})

# ---- softmax / log_softmax ----
run("softmax_last", lambda x: F.softmax(x, dim=-1), {"x": r(3, 21)})
run("softmax_dim0", lambda x: F.softmax(x, dim=0), {"x": r(3, 5)})
run("log_softmax_dim1", lambda x: F.log_softmax(x, dim=1), {"x": r(2, 3, 4)})
# Large logits: only a max-subtracting implementation stays finite.
run("log_softmax_large", lambda x: F.log_softmax(x, dim=-1), {"x": r(4, 35) * 40})
run("softmax_large", lambda x: F.softmax(x, dim=-1), {"x": r(2, 18) * 40})

# ---- layer_norm (eps 1e-5) ----
run("layer_norm_affine", lambda x, weight, bias: F.layer_norm(x, (40,), weight, bias, 1e-5),
    {"x": r(2, 3, 40) * 2 + 0.5, "weight": r(40), "bias": r(40)})
run("layer_norm_plain", lambda x: F.layer_norm(x, (6,), None, None, 1e-5), {"x": r(4, 6)})

# ---- embedding (repeated ids exercise the backward's accumulation) ----
run("embedding", lambda weight, idx: F.embedding(idx, weight),
    {"weight": r(10, 20), "idx": torch.tensor([[1, 3, 1], [9, 0, 3]], dtype=torch.int64)})

# ---- cross_entropy (mean over rows whose target is not ignore_index) ----
run("cross_entropy", lambda logits, targets: F.cross_entropy(logits, targets),
    {"logits": r(6, 37) * 3, "targets": torch.tensor([3, -100, 0, 36, 3, 17])})
run("cross_entropy_3d", lambda logits, targets: F.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1)),
    {"logits": r(2, 3, 5), "targets": torch.tensor([[1, 0, 4], [2, 2, 3]])})
run("cross_entropy_ignore2", lambda logits, targets: F.cross_entropy(logits, targets, ignore_index=2),
    {"logits": r(4, 5), "targets": torch.tensor([2, 0, 2, 4])})


# ---- fused optimizer kernels: one step of torch.optim's Adam / AdamW from a given state; "out" is
# the updated parameter, exp_avg and exp_avg_sq, flattened and joined (no gradient) ----
def adam_case(case, optimizer, weight_decay):
    inputs = {"param": r(3, 7), "grad": r(3, 7), "exp_avg": r(3, 7) * 0.1, "exp_avg_sq": torch.rand(3, 7) * 0.01}
    for name, t in inputs.items():
        put(case, name, t)
    p = inputs["param"].clone().requires_grad_(True)
    opt = optimizer([p], lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    p.grad = inputs["grad"].clone()
    # Two steps already taken: this one is step 3, as the C++ case passes.
    opt.state[p] = {"step": torch.tensor(2.0), "exp_avg": inputs["exp_avg"].clone(),
                    "exp_avg_sq": inputs["exp_avg_sq"].clone()}
    opt.step()
    st = opt.state[p]
    put(case, "out", torch.cat([p.detach().reshape(-1), st["exp_avg"].reshape(-1), st["exp_avg_sq"].reshape(-1)]))


adam_case("adam_update", torch.optim.Adam, 0.01)
adam_case("adamw_update", torch.optim.AdamW, 0.1)

# ---- causal attention: softmax(q k^T / sqrt(hs) + causal mask) v, composed (torch 1.13 has no
# scaled_dot_product_attention); a sweep of B, H, T, hs, and queries after a KV cache's keys
# (k and v longer than q: query i at position Tk - Tq + i) ----
def causal_attention(q, k, v):
    Tq, Tk = q.shape[-2], k.shape[-2]
    future = torch.arange(Tk)[None, :] > torch.arange(Tk - Tq, Tk)[:, None]
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    return F.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


for B, H, Tq, Tk, hs in [(1, 1, 1, 1, 8), (2, 3, 5, 5, 4), (1, 2, 70, 70, 8), (2, 1, 20, 20, 32), (1, 2, 3, 9, 8),
                         (2, 2, 1, 13, 16)]:
    run(f"causal_attention_b{B}h{H}q{Tq}k{Tk}d{hs}", causal_attention,
        {"q": r(B, H, Tq, hs), "k": r(B, H, Tk, hs), "v": r(B, H, Tk, hs)})


# The two groups below were added on two branches at once, each drawing from the generator's state
# after the cases above; each starts from that state again, so that every case keeps its values.
after_common_cases = torch.get_rng_state()

# ---- the modern block's ops (rms_norm, rope): drawn after everything above, so that earlier cases keep their values ----
# rms_norm (eps 1e-5), as torch.nn.functional.rms_norm (PyTorch 2.4+) computes it.
def rms_norm(x, weight=None, eps=1e-5):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


run("rms_norm_weight", lambda x, weight: rms_norm(x, weight), {"x": r(2, 3, 40) * 2 + 0.5, "weight": r(40)})
run("rms_norm_plain", lambda x: rms_norm(x), {"x": r(4, 6)})


# rope: the rotate-half convention (Llama's rotate_half, GPT-NeoX), base 10000, head size 8, at
# positions 3..7 (a KV cache's offset); the C++ test builds the same angle tables.
def rope(x, pos0, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(pos0, pos0 + T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


run("rope", lambda x: rope(x, 3), {"x": r(2, 3, 5, 8)})
# q as attention takes it: a [B, T, H, D] projection viewed as [B, H, T, D]
run("rope_strided", lambda x: rope(x.transpose(1, 2), 0), {"x": r(2, 5, 3, 8)})

torch.set_rng_state(after_common_cases)
# ---- the fused classifier (lathe's fused_cross_entropy: the loss and its gradient in one pass) is
# the mean cross-entropy; rows longer than 16 and not a multiple of it, ignored rows ----
run("fused_cross_entropy", lambda logits, targets: F.cross_entropy(logits, targets),
    {"logits": r(5, 41) * 3, "targets": torch.tensor([40, -100, 7, 0, 7])})
run("fused_cross_entropy_3d", lambda logits, targets: F.cross_entropy(logits.reshape(-1, 19), targets.reshape(-1),
                                                                      ignore_index=-1),
    {"logits": r(2, 2, 19) * 2, "targets": torch.tensor([[18, -1], [0, 3]])})


golden_safetensors.save(os.path.join(HERE, "nn_ops.safetensors"), tensors)
print(f"wrote {len(tensors)} tensors")
