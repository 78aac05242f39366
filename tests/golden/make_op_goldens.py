"""PyTorch's answers to the op registry's samples (ref/op_registry.cpp).

    bash tools/make_op_goldens.sh

which runs `lathe ref --write-op-samples tests/golden/op_samples.safetensors` (every golden sample
of every op, drawn by lathe, in each of its dtypes) and then this script:

    /usr/bin/python3 tests/golden/make_op_goldens.py tests/golden/op_samples.safetensors

It answers every case of the bundle through TORCH, one line per registry name, and writes
op_samples.expected.safetensors beside it: "<case>/output" and, when the case has a grad_output,
"<case>/grad.input.<k>" for each floating operand PyTorch computes a gradient for.
tests/test_op_cases.cpp and tests/test_ref_op.cpp compare lathe's answers with these.

A 16-bit case follows the reference kind's rule (docs/reference-cases.md): PyTorch computes it in
f32 from the 16-bit inputs and rounds the output and the gradients to the 16-bit dtype once.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_safetensors  # noqa: E402


def dims(a):
    """PyTorch's `dim` argument from a case's: absent or null for every dim."""
    d = a.get("dim")
    return d if d is None or isinstance(d, int) else tuple(d)


def reduce_all_or_dims(fn):
    """A reduction called without `dim` over everything, else over its dims."""
    return lambda x, a: fn(x[0]) if dims(a) is None else fn(x[0], dim=dims(a), keepdim=a.get("keepdim", False))


def var(x, a):
    correction = a.get("correction", 1)
    if dims(a) is None:
        return torch.var(x[0], unbiased=correction == 1)
    return torch.var(x[0], dim=dims(a), correction=correction, keepdim=a.get("keepdim", False))


def causal_attention(q, k, v, scale=None):
    """softmax(q k^T * scale + causal mask) v, composed (torch 1.13 has no
    scaled_dot_product_attention); k and v may be longer than q, query i at position Tk - Tq + i."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    Tq, Tk = q.shape[-2], k.shape[-2]
    future = torch.arange(Tk)[None, :] > torch.arange(Tk - Tq, Tk)[:, None]
    return torch.softmax((q @ k.transpose(-2, -1) * scale).masked_fill(future, float("-inf")), dim=-1) @ v


def attention_of_qkv(x, n_head, scale):
    B, T, C3 = x.shape
    q, k, v = (t.reshape(B, T, n_head, C3 // 3 // n_head).transpose(1, 2) for t in x.split(C3 // 3, dim=2))
    return causal_attention(q, k, v, scale).transpose(1, 2).reshape(B, T, C3 // 3)


def rms_norm(x, weight=None, eps=1e-5):
    """As torch.nn.functional.rms_norm (PyTorch 2.4 on) computes it."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def rope(x, cos, sin):
    """The rotate-half convention; the tables are constants."""
    half = x.shape[-1] // 2
    x1, x2, c, s = x[..., :half], x[..., half:], cos.detach(), sin.detach()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def adam_step(x, a):
    """One step of torch.optim.Adam (AdamW when decoupled) from the given state, step `step`: each
    parameter, then each exp_avg, then each exp_avg_sq, flattened and joined."""
    optimizer = torch.optim.AdamW if a.get("decoupled_weight_decay", False) else torch.optim.Adam
    params = []
    for i in range(0, len(x), 4):
        p = x[i].detach().clone().requires_grad_(True)
        p.grad = x[i + 1].detach().clone()
        params.append((p, x[i + 2].detach().clone(), x[i + 3].detach().clone()))
    opt = optimizer([p for p, _, _ in params], lr=a.get("lr", 1e-3), weight_decay=a.get("weight_decay", 0.0),
                    betas=(0.9, 0.999), eps=1e-8)
    for p, m, s in params:
        opt.state[p] = {"step": torch.tensor(float(a.get("step", 1) - 1)), "exp_avg": m, "exp_avg_sq": s}
    opt.step()
    parts = [[p.detach() for p, _, _ in params], [opt.state[p]["exp_avg"] for p, _, _ in params],
             [opt.state[p]["exp_avg_sq"] for p, _, _ in params]]
    return torch.cat([t.reshape(-1) for part in parts for t in part])


def split_joined(x, a):
    pieces = torch.split(x[0], a["split_size_or_sections"], dim=a.get("dim", 0))
    return torch.cat([p.reshape(-1) for p in pieces])


# The op registry's names -> PyTorch's call on the operands x (a list) and the arguments a (a dict).
TORCH = {
    "add": lambda x, a: torch.add(*x, **a),
    "sub": lambda x, a: torch.sub(*x, **a),
    "mul": lambda x, a: torch.mul(*x, **a),
    "div": lambda x, a: torch.div(*x, **a),
    "pow": lambda x, a: torch.pow(*x, **a),
    "maximum": lambda x, a: torch.maximum(*x),
    "minimum": lambda x, a: torch.minimum(*x),
    "neg": lambda x, a: torch.neg(x[0]),
    "exp": lambda x, a: torch.exp(x[0]),
    "log": lambda x, a: torch.log(x[0]),
    "sqrt": lambda x, a: torch.sqrt(x[0]),
    "rsqrt": lambda x, a: torch.rsqrt(x[0]),
    "tanh": lambda x, a: torch.tanh(x[0]),
    "relu": lambda x, a: torch.relu(x[0]),
    "sigmoid": lambda x, a: torch.sigmoid(x[0]),
    "abs": lambda x, a: torch.abs(x[0]),
    "square": lambda x, a: torch.square(x[0]),
    "silu": lambda x, a: F.silu(x[0]),
    "log_sigmoid": lambda x, a: F.logsigmoid(x[0]),
    "gelu": lambda x, a: F.gelu(x[0], **a),
    "clamp": lambda x, a: torch.clamp(x[0], **a),
    "where": lambda x, a: torch.where(*x),
    "masked_fill": lambda x, a: x[0].masked_fill(x[1], a["value"]),
    "sum": reduce_all_or_dims(torch.sum),
    "mean": reduce_all_or_dims(torch.mean),
    "var": var,
    "max": lambda x, a: torch.max(x[0]) if "dim" not in a else torch.max(x[0], **a).values,
    "matmul": lambda x, a: torch.matmul(*x),
    "softmax": lambda x, a: F.softmax(x[0], **a),
    "log_softmax": lambda x, a: F.log_softmax(x[0], **a),
    "layer_norm": lambda x, a: F.layer_norm(x[0], x[0].shape[-1:], *x[1:], **a),
    "embedding": lambda x, a: F.embedding(*x),
    "cross_entropy": lambda x, a: F.cross_entropy(x[0], x[1].long(), **a),
    "fused_cross_entropy": lambda x, a: F.cross_entropy(x[0].reshape(-1, x[0].shape[-1]), x[1].reshape(-1).long(), **a),
    "cat": lambda x, a: torch.cat(x, **a),
    "stack": lambda x, a: torch.stack(x, **a),
    "index_select": lambda x, a: torch.index_select(x[0], a["dim"], x[1]),
    "gather": lambda x, a: torch.gather(x[0], a["dim"], x[1]),
    "scaled_dot_product_attention": lambda x, a: causal_attention(*x, scale=a.get("scale")),
    "eq": lambda x, a: torch.eq(*x),
    "ne": lambda x, a: torch.ne(*x),
    "lt": lambda x, a: torch.lt(*x),
    "le": lambda x, a: torch.le(*x),
    "gt": lambda x, a: torch.gt(*x),
    "ge": lambda x, a: torch.ge(*x),
    "squared_relu": lambda x, a: F.relu(x[0]).square(),
    "softcap": lambda x, a: a["cap"] * torch.tanh(x[0] / a["cap"]),
    "argmax": lambda x, a: torch.argmax(x[0], **a),
    "split": split_joined,
    "rms_norm": lambda x, a: rms_norm(*x, **a),
    "rope": lambda x, a: rope(*x),
    "causal_attention": lambda x, a: causal_attention(*x, scale=a.get("scale")),
    "causal_attention_qkv": lambda x, a: attention_of_qkv(x[0], a["n_head"], a["scale"]),
    "adam_update": adam_step,
    "adam_update_multi": adam_step,
}


def answer(document, tensors):
    """PyTorch's output and gradients of one case, under the reference kind's 16-bit rule."""
    inputs = [tensors[f"input.{k}"] for k in range(len(tensors)) if f"input.{k}" in tensors]
    dtype = next((t.dtype for t in inputs if t.is_floating_point()), torch.float32)
    compute = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    leaves = [t.to(compute).requires_grad_() if t.is_floating_point() else t for t in inputs]
    args = {k: v for k, v in document.get("args", {}).items()}
    out = TORCH[document["op"]](leaves, args)
    result = {"output": out.detach().to(dtype) if out.is_floating_point() else out.detach()}
    if "grad_output" in tensors:
        out.backward(tensors["grad_output"].to(compute))
        for k, t in enumerate(leaves):
            if t.is_floating_point() and t.grad is not None:
                result[f"grad.input.{k}"] = t.grad.to(dtype)
    return result


def main():
    bundle = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "op_samples.safetensors")
    tensors, metadata = golden_safetensors.load(bundle)
    documents = json.loads(metadata["cases"])
    by_case = {}
    for name, t in tensors.items():
        case, tensor = name.split("/", 1)
        by_case.setdefault(case, {})[tensor] = t
    expected = {}
    for case, document in documents.items():
        for tensor, t in answer(document, by_case.get(case, {})).items():
            expected[f"{case}/{tensor}"] = t
    out = bundle.replace(".safetensors", ".expected.safetensors")
    golden_safetensors.save(out, expected)
    print(f"wrote PyTorch's answers to {len(documents)} cases to {out}")


if __name__ == "__main__":
    main()
