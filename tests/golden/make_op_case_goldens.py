"""Golden cases of the `lathe ref` kind "op" (docs/reference-cases.md), answered by PyTorch.

    /usr/bin/python3 tests/golden/make_op_case_goldens.py

Every op of the kind in f32, f64, bf16 and f16, forward and backward (grad_output given). Each
case is what a user would write as one file; to keep the repository small they are bundled:
  op_cases.safetensors           tensors "<case>/input.<k>", "<case>/grad_output"; metadata
                                 "cases" = {case: the case document}
  op_cases.expected.safetensors  tensors "<case>/output", "<case>/grad.input.<k>"
The later lines call the same ops in the other ways PyTorch allows (a 0-d operand, dim as an
integer or negative, reductions over everything, vector and broadcast batched matmul, 1-D
layer_norm and cross_entropy). tests/test_ref_op.cpp splits the bundle into cases and compares lathe's answers with these at the
dtype's tolerance of torch.testing.assert_close.

A 16-bit case follows the kind's rule: PyTorch computes it in f32 from the 16-bit inputs and
rounds the output and the gradients to the 16-bit dtype once.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_safetensors import save  # noqa: E402

torch.manual_seed(1234)
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}


def u(*shape, lo=-2.0, hi=2.0):
    return torch.rand(tuple(shape), dtype=torch.float64) * (hi - lo) + lo


def ids(high, *shape):
    return torch.randint(0, high, shape, dtype=torch.int64)


def causal_sdpa(q, k, v, scale=None):
    """torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale), as
    PyTorch 2 documents it (Debian's PyTorch 1.13 predates the function)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    T = q.shape[-2]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax((q @ k.transpose(-2, -1) * scale).masked_fill(future, float("-inf")), dim=-1) @ v


# (op, args, inputs drawn in f64 (ints and bools stay as they are), the call on the inputs)
SPECS = [
    ("add", {}, lambda: [u(3, 4), u(4)], lambda x, a: x[0] + x[1]),
    ("sub", {}, lambda: [u(3, 1), u(1, 5)], lambda x, a: x[0] - x[1]),
    ("mul", {}, lambda: [u(2, 3, 4), u(3, 4)], lambda x, a: x[0] * x[1]),
    ("div", {}, lambda: [u(3, 4), u(3, 4, lo=0.5, hi=2.0)], lambda x, a: x[0] / x[1]),
    ("pow", {}, lambda: [u(3, 4, lo=0.5, hi=2.0), u(3, 4, lo=-1.5, hi=1.5)], lambda x, a: torch.pow(x[0], x[1])),
    ("maximum", {}, lambda: [u(3, 4), u(3, 4)], lambda x, a: torch.maximum(x[0], x[1])),
    ("minimum", {}, lambda: [u(3, 4), u(4)], lambda x, a: torch.minimum(x[0], x[1])),
    ("neg", {}, lambda: [u(3, 4)], lambda x, a: torch.neg(x[0])),
    ("exp", {}, lambda: [u(3, 4)], lambda x, a: torch.exp(x[0])),
    ("log", {}, lambda: [u(3, 4, lo=0.1, hi=3.0)], lambda x, a: torch.log(x[0])),
    ("sqrt", {}, lambda: [u(3, 4, lo=0.1, hi=3.0)], lambda x, a: torch.sqrt(x[0])),
    ("rsqrt", {}, lambda: [u(3, 4, lo=0.1, hi=3.0)], lambda x, a: torch.rsqrt(x[0])),
    ("tanh", {}, lambda: [u(3, 4)], lambda x, a: torch.tanh(x[0])),
    ("relu", {}, lambda: [u(3, 4)], lambda x, a: torch.relu(x[0])),
    ("sigmoid", {}, lambda: [u(3, 4)], lambda x, a: torch.sigmoid(x[0])),
    ("abs", {}, lambda: [u(3, 4)], lambda x, a: torch.abs(x[0])),
    ("square", {}, lambda: [u(3, 4)], lambda x, a: torch.square(x[0])),
    ("silu", {}, lambda: [u(3, 4)], lambda x, a: F.silu(x[0])),
    ("gelu", {}, lambda: [u(3, 4, lo=-3, hi=3)], lambda x, a: F.gelu(x[0])),
    ("gelu", {"approximate": "tanh"}, lambda: [u(3, 4, lo=-3, hi=3)], lambda x, a: F.gelu(x[0], **a)),
    ("clamp", {"min": -0.5, "max": 1.0}, lambda: [u(3, 4)], lambda x, a: torch.clamp(x[0], **a)),
    ("clamp", {"min": None, "max": 0.25}, lambda: [u(3, 4)], lambda x, a: torch.clamp(x[0], **a)),
    ("where", {}, lambda: [torch.rand(3, 4) > 0.5, u(3, 4), u(4)], lambda x, a: torch.where(x[0], x[1], x[2])),
    ("masked_fill", {"value": -1.5}, lambda: [u(3, 4), torch.rand(4) > 0.5],
     lambda x, a: x[0].masked_fill(x[1], a["value"])),
    ("sum", {"dim": [1], "keepdim": True}, lambda: [u(3, 4, 5)], lambda x, a: torch.sum(x[0], **a)),
    ("sum", {"dim": None}, lambda: [u(3, 4)], lambda x, a: torch.sum(x[0])),
    ("mean", {"dim": [0, 2]}, lambda: [u(3, 4, 5)], lambda x, a: torch.mean(x[0], **a)),
    ("var", {"dim": [1], "keepdim": False, "correction": 1}, lambda: [u(3, 6)],
     lambda x, a: torch.var(x[0], **a)),
    ("var", {"dim": None, "correction": 0}, lambda: [u(4, 5)], lambda x, a: torch.var(x[0], unbiased=False)),
    ("max", {"dim": 1, "keepdim": True}, lambda: [u(3, 5)], lambda x, a: torch.max(x[0], **a).values),
    ("matmul", {}, lambda: [u(2, 3, 8), u(8, 5)], lambda x, a: torch.matmul(x[0], x[1])),
    ("matmul", {}, lambda: [u(7), u(7, 3)], lambda x, a: torch.matmul(x[0], x[1])),
    ("softmax", {"dim": -1}, lambda: [u(3, 7, lo=-4, hi=4)], lambda x, a: F.softmax(x[0], **a)),
    ("softmax", {"dim": 0}, lambda: [u(4, 3, lo=-4, hi=4)], lambda x, a: F.softmax(x[0], **a)),
    ("log_softmax", {"dim": 1}, lambda: [u(3, 7, lo=-4, hi=4)], lambda x, a: F.log_softmax(x[0], **a)),
    ("layer_norm", {"eps": 1e-5}, lambda: [u(2, 3, 8), u(8, lo=0.5, hi=1.5), u(8, lo=-0.2, hi=0.2)],
     lambda x, a: F.layer_norm(x[0], (x[0].shape[-1],), x[1], x[2], a["eps"])),
    ("embedding", {}, lambda: [ids(10, 2, 5), u(10, 4)], lambda x, a: F.embedding(x[0], x[1])),
    ("cross_entropy", {}, lambda: [u(6, 10, lo=-3, hi=3), ids(10, 6)], lambda x, a: F.cross_entropy(x[0], x[1])),
    ("cross_entropy", {"ignore_index": 3}, lambda: [u(8, 5, lo=-3, hi=3), torch.tensor([0, 3, 1, 4, 3, 2, 1, 0])],
     lambda x, a: F.cross_entropy(x[0], x[1], **a)),
    ("cat", {"dim": 1}, lambda: [u(2, 3), u(2, 1), u(2, 4)], lambda x, a: torch.cat(x, **a)),
    ("stack", {"dim": 0}, lambda: [u(2, 3), u(2, 3)], lambda x, a: torch.stack(x, **a)),
    ("index_select", {"dim": 0}, lambda: [u(5, 3), torch.tensor([4, 0, 4, 2])],
     lambda x, a: torch.index_select(x[0], a["dim"], x[1])),
    ("gather", {"dim": 1}, lambda: [u(3, 4), ids(4, 3, 6)], lambda x, a: torch.gather(x[0], a["dim"], x[1])),
    # the same ops again in the other ways PyTorch lets one call them
    ("add", {}, lambda: [u(3, 4), u()], lambda x, a: x[0] + x[1]),
    ("pow", {}, lambda: [u(2, 3, lo=0.5, hi=2.0), u(1, lo=-2, hi=2)], lambda x, a: torch.pow(x[0], x[1])),
    ("clamp", {"min": 0.1}, lambda: [u(3, 4)], lambda x, a: torch.clamp(x[0], **a)),
    ("where", {}, lambda: [torch.rand(4) > 0.5, u(3, 4), u(3, 1)], lambda x, a: torch.where(x[0], x[1], x[2])),
    ("masked_fill", {"value": 2.5}, lambda: [u(2, 3), torch.rand(2, 3) > 0.5],
     lambda x, a: x[0].masked_fill(x[1], a["value"])),
    ("sum", {"dim": 0}, lambda: [u(3, 4)], lambda x, a: torch.sum(x[0], **a)),
    ("sum", {"dim": [-1, 0], "keepdim": False}, lambda: [u(2, 3, 4)], lambda x, a: torch.sum(x[0], **a)),
    ("mean", {}, lambda: [u(3, 4)], lambda x, a: torch.mean(x[0])),
    ("mean", {"dim": -1, "keepdim": True}, lambda: [u(2, 3, 4)], lambda x, a: torch.mean(x[0], **a)),
    ("var", {"dim": [0, 1], "keepdim": True}, lambda: [u(3, 4, 2)], lambda x, a: torch.var(x[0], **a)),
    ("max", {}, lambda: [u(3, 5)], lambda x, a: torch.max(x[0])),
    ("max", {"dim": -1}, lambda: [u(2, 3, 5)], lambda x, a: torch.max(x[0], **a).values),
    ("matmul", {}, lambda: [u(6), u(6)], lambda x, a: torch.matmul(x[0], x[1])),
    ("matmul", {}, lambda: [u(2, 1, 3, 4), u(5, 4, 2)], lambda x, a: torch.matmul(x[0], x[1])),
    ("matmul", {}, lambda: [u(4, 5), u(5)], lambda x, a: torch.matmul(x[0], x[1])),
    ("softmax", {"dim": 1}, lambda: [u(2, 5, 3, lo=-4, hi=4)], lambda x, a: F.softmax(x[0], **a)),
    ("log_softmax", {"dim": -1}, lambda: [u(2, 3, 6, lo=-4, hi=4)], lambda x, a: F.log_softmax(x[0], **a)),
    ("layer_norm", {}, lambda: [u(6), u(6, lo=0.5, hi=1.5), u(6, lo=-0.2, hi=0.2)],
     lambda x, a: F.layer_norm(x[0], (6,), x[1], x[2])),
    ("embedding", {}, lambda: [ids(7, 9), u(7, 3)], lambda x, a: F.embedding(x[0], x[1])),
    ("cross_entropy", {}, lambda: [u(9, lo=-3, hi=3), torch.tensor(4)], lambda x, a: F.cross_entropy(x[0], x[1])),
    ("cat", {"dim": -1}, lambda: [u(2, 2), u(2, 3)], lambda x, a: torch.cat(x, **a)),
    ("cat", {}, lambda: [u(1, 3), u(2, 3)], lambda x, a: torch.cat(x)),
    ("stack", {"dim": -1}, lambda: [u(2, 3), u(2, 3), u(2, 3)], lambda x, a: torch.stack(x, **a)),
    ("index_select", {"dim": 1}, lambda: [u(2, 5), torch.tensor([1, 1, 3])],
     lambda x, a: torch.index_select(x[0], a["dim"], x[1])),
    ("gather", {"dim": 0}, lambda: [u(4, 3), ids(4, 2, 3)], lambda x, a: torch.gather(x[0], a["dim"], x[1])),
    # T = 70: two of lathe's 64-query blocks, the second cut short.
    ("scaled_dot_product_attention", {"is_causal": True}, lambda: [u(2, 3, 70, 8), u(2, 3, 70, 8), u(2, 3, 70, 8)],
     lambda x, a: causal_sdpa(*x)),
    ("scaled_dot_product_attention", {"is_causal": True, "scale": 0.5}, lambda: [u(1, 2, 5, 4), u(1, 2, 5, 4), u(1, 2, 5, 4)],
     lambda x, a: causal_sdpa(*x, scale=a["scale"])),
    # Added later, after every earlier draw, so that the earlier cases keep their inputs.
    ("log_sigmoid", {}, lambda: [u(3, 4, lo=-8, hi=8)], lambda x, a: F.logsigmoid(x[0])),
]


def case_inputs(draw, dtype):
    return [t.to(dtype) if t.is_floating_point() else t for t in draw()]


def answer(fn, inputs, args, dtype, grad_output):
    """PyTorch's answer under the kind's rule: a 16-bit case computes in f32 and rounds once."""
    compute = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    leaves = [t.to(compute).requires_grad_() if t.is_floating_point() else t for t in inputs]
    out = fn(leaves, args)
    out.backward(grad_output.to(compute))
    grads = {f"grad.input.{k}": t.grad.to(dtype) for k, t in enumerate(leaves) if t.is_floating_point()}
    return out.detach().to(dtype), grads


def main():
    cases, expected, documents = {}, {}, {}
    counts = {}
    for op, args, draw, fn in SPECS:
        counts[op] = counts.get(op, 0) + 1
        for dname, dtype in DTYPES.items():
            name = f"{op}{counts[op]}_{dname}"
            inputs = case_inputs(draw, dtype)
            shape_probe = fn([t.to(torch.float64) if t.is_floating_point() else t for t in inputs], args)
            grad_output = u(*shape_probe.shape).to(dtype)
            out, grads = answer(fn, inputs, args, dtype, grad_output)
            documents[name] = {"kind": "op", "op": op, "args": args}
            for k, t in enumerate(inputs):
                cases[f"{name}/input.{k}"] = t
            cases[f"{name}/grad_output"] = grad_output
            expected[f"{name}/output"] = out
            for key, g in grads.items():
                expected[f"{name}/{key}"] = g
    save(os.path.join(HERE, "op_cases.safetensors"), cases, {"cases": documents})
    save(os.path.join(HERE, "op_cases.expected.safetensors"), expected)
    print(f"wrote {len(documents)} op cases")


if __name__ == "__main__":
    main()
