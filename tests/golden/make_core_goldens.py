"""Golden values for the op test registry (tests/test_op_cases.cpp) and tests/test_dtypes.cpp,
computed by PyTorch.

    /usr/bin/python3 tests/golden/make_core_goldens.py

Writes core_ops.safetensors next to this script (golden_safetensors.py: the one golden format).
Names are "<case>.<tensor>", in the order the case made them: the inputs (a, b, x, cond, idx, ...),
"out" (the forward result), "gout" (the weight of each output element in the scalar objective
sum(out * gout)) and "grad_<input>" (torch's gradient of that objective). The C++ test applies the
same function to the same inputs; a case's function is written once here and once there, under
the same name.

Also written: casts of a list of values between all 7 dtypes ("cast.<from>.<to>.src/dst"; torch's
rounding, including bf16 and f16 ties to even), roundings to the 16-bit floats
("round.<from>.<to>.src/dst"), and torch.result_type for every pair of dtypes (metadata
"promotions", JSON [[a, b, result], ...]).
"""
import os

import torch

import golden_safetensors
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20240612)

DTYPES = {  # lathe name -> torch dtype
    "f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16,
    "i32": torch.int32, "i64": torch.int64, "bool": torch.bool,
}
NAME_OF = {v: k for k, v in DTYPES.items()}

tensors = {}  # name -> tensor, in insertion order


def put(name, t):
    assert name not in tensors, name
    tensors[name] = t.detach().clone().contiguous()


def run(case, fn, inputs, grad=True):
    """Stores the inputs, fn(**inputs), and (for floating outputs) a random gout and the gradients
    of sum(out * gout) for every floating input."""
    leaves = {}
    for name, t in inputs.items():
        if grad and t.is_floating_point():
            t = t.clone().requires_grad_(True)
        leaves[name] = t
        put(f"{case}.{name}", t)
    out = fn(**leaves)
    put(f"{case}.out", out)
    if grad and out.is_floating_point():
        gout = torch.randn(out.shape, dtype=out.dtype)
        (out * gout).sum().backward()
        put(f"{case}.gout", gout)
        for name, t in leaves.items():
            if t.is_floating_point():
                put(f"{case}.grad_{name}", t.grad)


r = torch.randn


def positive(*shape):
    return r(*shape).abs() + 0.2


def away_from_zero(*shape):
    x = r(*shape)
    return x.sign() * (x.abs() + 0.5)


# ---- binary ops with broadcasting ----
A, B = r(2, 3, 4), r(3, 1)
run("add_bcast", lambda a, b: a + b, {"a": A, "b": B})
run("sub_bcast", lambda a, b: a - b, {"a": A, "b": B})
run("mul_bcast", lambda a, b: a * b, {"a": A, "b": B})
run("div_bcast", lambda a, b: a / b, {"a": A, "b": away_from_zero(3, 1)})
run("pow_bcast", lambda a, b: torch.pow(a, b), {"a": positive(2, 3, 4), "b": r(4) * 1.5})
run("maximum_bcast", lambda a, b: torch.maximum(a, b), {"a": A, "b": r(4)})
run("minimum_bcast", lambda a, b: torch.minimum(a, b), {"a": A, "b": r(4)})
# Ties split the gradient evenly between the operands.
TA, TB = torch.tensor([1.0, 2.0, 3.0, 4.0, -1.0]), torch.tensor([1.0, 3.0, 3.0, 0.0, -1.0])
run("maximum_ties", lambda a, b: torch.maximum(a, b), {"a": TA, "b": TB})
run("minimum_ties", lambda a, b: torch.minimum(a, b), {"a": TA, "b": TB})
# Both operands broadcast: [4, 1] with [3].
run("mul_outer", lambda a, b: a * b, {"a": r(4, 1), "b": r(3)})
# Non-contiguous operands: a transposed view, a strided slice.
run("add_noncontig", lambda a, b: a.t() + b, {"a": r(4, 3), "b": r(4)})
run("mul_noncontig", lambda a, b: a[:, ::2] * b.t(), {"a": r(3, 8), "b": r(4, 3)})
run("div_noncontig", lambda a, b: a.t() / b, {"a": r(5, 3), "b": away_from_zero(3, 1)})

# ---- comparisons (bool results, no gradient) ----
CA = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
CB = torch.tensor([2.0, 2.0, 1.0])
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    run(f"{op}_bcast", lambda a, b, op=op: getattr(torch, op)(a, b), {"a": CA, "b": CB}, grad=False)

# ---- scalar forms (the scalar keeps the tensor's dtype) ----
X = r(3, 4)
run("add_scalar", lambda x: x + 2.5, {"x": X})
run("sub_scalar", lambda x: x - 0.75, {"x": X})
run("mul_scalar", lambda x: x * -1.5, {"x": X})
run("div_scalar", lambda x: x / 3.0, {"x": X})
run("pow_scalar", lambda x: x ** 2.5, {"x": positive(3, 4)})
run("pow_scalar_neg", lambda x: x ** -0.5, {"x": positive(3, 4)})
run("pow_scalar_int", lambda x: x ** 3.0, {"x": X})

# ---- unary ops; x holds exact 0 and the clamp bounds to pin the behaviour at kinks ----
U = r(3, 5)
U[0, 0], U[0, 1], U[0, 2], U[1, 0] = 0.0, -0.5, 0.5, 0.2
run("neg", lambda x: -x, {"x": U})
run("exp", lambda x: torch.exp(x), {"x": U})
run("log", lambda x: torch.log(x), {"x": positive(3, 5)})
run("sqrt", lambda x: torch.sqrt(x), {"x": positive(3, 5)})
run("rsqrt", lambda x: torch.rsqrt(x), {"x": positive(3, 5)})
run("tanh", lambda x: torch.tanh(x), {"x": U})
run("gelu", lambda x: F.gelu(x, approximate="tanh"), {"x": U * 2})
run("relu", lambda x: torch.relu(x), {"x": U})
run("sigmoid", lambda x: torch.sigmoid(x), {"x": U * 3})
run("abs", lambda x: torch.abs(x), {"x": U})
run("square", lambda x: torch.square(x), {"x": U})
run("clamp", lambda x: torch.clamp(x, -0.5, 0.5), {"x": U})
run("clamp_lo", lambda x: torch.clamp(x, min=-0.3), {"x": U})
run("clamp_hi", lambda x: torch.clamp(x, max=0.2), {"x": U})
run("exp_noncontig", lambda x: torch.exp(x.t()), {"x": U})
run("gelu_noncontig", lambda x: F.gelu(x[:, 1::2], approximate="tanh"), {"x": r(3, 8)})
run("tanh_noncontig", lambda x: torch.tanh(x.t()), {"x": r(4, 3)})

# ---- selection ----
run("where_bcast", lambda cond, a, b: torch.where(cond, a, b),
    {"cond": torch.tensor([[True], [False], [True]]), "a": r(3, 4), "b": r(4)})
run("masked_fill", lambda x, mask: x.masked_fill(mask, -2.0),
    {"x": r(3, 4), "mask": torch.tensor([[True, False, False, True]])})

# ---- reductions ----
R = r(3, 4, 5)
run("sum_all", lambda x: x.sum(), {"x": R})
run("sum_d02", lambda x: x.sum(dim=(0, 2)), {"x": R})
run("sum_d1_keep", lambda x: x.sum(dim=1, keepdim=True), {"x": R})
run("sum_dlast", lambda x: x.sum(dim=-1), {"x": R})
run("sum_noncontig", lambda x: x.transpose(0, 2).sum(dim=0), {"x": R})
run("mean_all", lambda x: x.mean(), {"x": R})
run("mean_d1", lambda x: x.mean(dim=1), {"x": R})
run("mean_d02_keep", lambda x: x.mean(dim=(0, 2), keepdim=True), {"x": R})
run("max_d1", lambda x: x.max(dim=1).values, {"x": R})
run("max_dlast_keep", lambda x: x.max(dim=-1, keepdim=True).values, {"x": R})
run("argmax_d1", lambda x: x.argmax(dim=1), {"x": R}, grad=False)
run("argmax_d0_keep", lambda x: x.argmax(dim=0, keepdim=True), {"x": R}, grad=False)
run("max_full", lambda x: x.max(), {"x": R})
# Ties: max over a dim returns (and backpropagates to) the first maximum; the full max shares
# the gradient evenly between the tied elements.
MT = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]])
run("max_d1_ties", lambda x: x.max(dim=1).values, {"x": MT})
run("argmax_d1_ties", lambda x: x.argmax(dim=1), {"x": MT}, grad=False)
run("max_full_ties", lambda x: x.max(), {"x": MT})
run("var_all", lambda x: x.var(), {"x": R})
run("var_d1", lambda x: x.var(dim=1), {"x": R})
run("var_d02_c0_keep", lambda x: x.var(dim=(0, 2), unbiased=False, keepdim=True), {"x": R})

# ---- joining and splitting ----
run("cat_d1", lambda a, b, c: torch.cat([a, b, c], dim=1), {"a": r(2, 3), "b": r(2, 1), "c": r(2, 2)})
run("cat_d0_noncontig", lambda a, b: torch.cat([a.t(), b], dim=0), {"a": r(3, 2), "b": r(1, 3)})
run("cat_dlast_3d", lambda a, b: torch.cat([a, b], dim=-1), {"a": r(2, 2, 3), "b": r(2, 2, 2)})
run("stack_d0", lambda a, b: torch.stack([a, b], dim=0), {"a": r(2, 3), "b": r(2, 3)})
run("stack_d1", lambda a, b, c: torch.stack([a, b, c], dim=1), {"a": r(2, 3), "b": r(2, 3), "c": r(2, 3)})
run("stack_dlast", lambda a, b: torch.stack([a, b], dim=-1), {"a": r(2, 3), "b": r(2, 3)})
# Pieces joined back in reverse order, so values and the backward of each piece are both pinned.
run("split_size", lambda x: torch.cat([p.reshape(-1) for p in reversed(torch.split(x, 2, dim=0))]),
    {"x": r(5, 3)})
run("split_sizes", lambda x: torch.cat([p.reshape(-1) for p in reversed(torch.split(x, [1, 3, 1], dim=1))]),
    {"x": r(2, 5)})

# ---- indexing (repeated indices exercise the backward's accumulation) ----
run("index_select_d1", lambda x, idx: torch.index_select(x, 1, idx),
    {"x": r(3, 5), "idx": torch.tensor([4, 0, 4, 2])})
run("index_select_d0", lambda x, idx: torch.index_select(x, 0, idx),
    {"x": r(4, 3), "idx": torch.tensor([3, 3, 1])})
run("index_select_3d", lambda x, idx: torch.index_select(x, 1, idx),
    {"x": r(2, 4, 3), "idx": torch.tensor([1, 1, 3, 0, 1])})
run("index_select_noncontig", lambda x, idx: torch.index_select(x.t(), 0, idx),
    {"x": r(3, 4), "idx": torch.tensor([2, 0, 2])})
run("gather_d1", lambda x, idx: torch.gather(x, 1, idx),
    {"x": r(3, 4), "idx": torch.tensor([[0, 3], [2, 2], [1, 0]])})
run("gather_d0", lambda x, idx: torch.gather(x, 0, idx),
    {"x": r(3, 4), "idx": torch.tensor([[0, 2, 2, 1], [1, 1, 0, 2]])})
run("gather_smaller", lambda x, idx: torch.gather(x, 1, idx),
    {"x": r(4, 5), "idx": torch.tensor([[4, 4, 0], [1, 2, 3]])})
run("gather_3d", lambda x, idx: torch.gather(x, 2, idx),
    {"x": r(2, 3, 4), "idx": torch.randint(0, 4, (2, 3, 6))})
run("gather_noncontig", lambda x, idx: torch.gather(x.t(), 0, idx),
    {"x": r(3, 4), "idx": torch.tensor([[3, 0, 1], [3, 3, 2]])})

# ---- integer ops ----
IA = torch.tensor([7, -7, 9, 0, 5], dtype=torch.int64)
IB = torch.tensor([2, 2, -4, 3, 5], dtype=torch.int64)
run("int_div", lambda a, b: a / b, {"a": IA, "b": IB}, grad=False)  # true division: f32

# ---- 16-bit floats and mixed dtypes (tests/test_dtypes.cpp; "dt_" cases) ----
H = r(3, 4)
run("dt_bf16_add", lambda a, b: a + b, {"a": H.bfloat16(), "b": r(4).bfloat16()}, grad=False)
run("dt_bf16_mul_scalar", lambda x: x * 0.1, {"x": H.bfloat16()}, grad=False)
run("dt_bf16_add_scalar", lambda x: x + 1.001, {"x": H.bfloat16()}, grad=False)
run("dt_f16_div", lambda a, b: a / b, {"a": H.half(), "b": away_from_zero(3, 1).half()}, grad=False)
run("dt_f16_mul_scalar", lambda x: x * 0.1, {"x": H.half()}, grad=False)
run("dt_bf16_exp", lambda x: torch.exp(x), {"x": H.bfloat16()}, grad=False)
run("dt_bf16_sum", lambda x: x.sum(dim=1), {"x": r(3, 40).bfloat16()}, grad=False)
run("dt_bf16_f32_mul", lambda a, b: a * b, {"a": H.bfloat16(), "b": r(3, 1)}, grad=False)
run("dt_f16_bf16_add", lambda a, b: a + b, {"a": H.half(), "b": r(4).bfloat16()}, grad=False)
run("dt_i32_f16_mul", lambda a, b: a * b, {"a": torch.tensor([1, -2, 300], dtype=torch.int32),
                                           "b": torch.tensor([0.5, 0.25, 300.0]).half()}, grad=False)
run("dt_i64_i32_add", lambda a, b: a + b, {"a": torch.tensor([1, -2, 3 * 2**40]),
                                           "b": torch.tensor([7, 2**31 - 1, 5], dtype=torch.int32)}, grad=False)
run("dt_bool_i32_add", lambda a, b: a + b, {"a": torch.tensor([True, False, True]),
                                            "b": torch.tensor([3, 4, -5], dtype=torch.int32)}, grad=False)

# ---- casts between all dtypes ----
CAST_VALUES = [0.0, 1.0, -1.0, 2.5, -2.7, 0.3, 100.25, -1000.5, 70000.0, 1e-3, 3.0e9, 123456789.0]
casts = {}  # (src, dst) -> (src values, dst values)
for sname, sd in DTYPES.items():
    src = torch.tensor(CAST_VALUES, dtype=torch.float64)
    if sd in (torch.int32, torch.int64):
        src = src[src.abs() < 2.0**31].to(sd)
    else:
        src = src.to(sd)
    for dname, dd in DTYPES.items():
        s = src
        if dd in (torch.int32, torch.int64) and s.is_floating_point():
            limit = 2.0**31 if dd == torch.int32 else 2.0**63
            s = s[s.double().abs() < limit]  # out-of-range float->int casts are undefined
        casts[(sname, dname)] = (s, s.to(dd))

# Rounding to the 16-bit floats: halfway cases (ties to even), overflow, subnormals, and an f64
# value whose rounding differs when it goes through f32 first.
ROUND_VALUES = [
    1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-8), 1.0 + 2**-8 + 2**-20, 1.0 + 2**-8 + 2**-30,
    1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-11 + 2**-20, 65504.0, 65519.0, 65520.0, 1e5,
    6e-8, 3e-8, 2e-8, 1e-4, 3.3895313892515355e38, 1e-40, 0.1, -0.1, 1.0 / 3.0,
]
rounding = {}
for sname in ["f32", "f64"]:
    src = torch.tensor(ROUND_VALUES, dtype=torch.float64).to(DTYPES[sname])
    for dname in ["bf16", "f16"]:
        rounding[(sname, dname)] = (src, src.to(DTYPES[dname]))

promotion = {}
for a, ta in DTYPES.items():
    for b, tb in DTYPES.items():
        promotion[(a, b)] = NAME_OF[torch.result_type(torch.ones(2, dtype=ta), torch.ones(2, dtype=tb))]

# ---- cases added later: drawn after everything above, so that earlier cases keep their values ----
run("silu", lambda x: F.silu(x), {"x": U * 3})
run("gelu_erf", lambda x: F.gelu(x, approximate="none"), {"x": U * 3})
run("squared_relu", lambda x: F.relu(x).square(), {"x": U * 3})
run("softcap", lambda x: 2.0 * torch.tanh(x / 2.0), {"x": U * 5})  # past the cap, where tanh bends
run("log_sigmoid", lambda x: F.logsigmoid(x), {"x": U * 8})  # where exp(-|x|) is far below 1


# ---- writer ----
def all_tensors():
    """Every golden tensor under its name: the cases, then the casts and roundings."""
    out = dict(tensors)
    for (src, dst), (a, b) in casts.items():
        out[f"cast.{src}.{dst}.src"] = a
        out[f"cast.{src}.{dst}.dst"] = b
    for (src, dst), (a, b) in rounding.items():
        out[f"round.{src}.{dst}.src"] = a
        out[f"round.{src}.{dst}.dst"] = b
    return out


golden_safetensors.save(os.path.join(HERE, "core_ops.safetensors"), all_tensors(),
                        {"promotions": [[a, b, res] for (a, b), res in promotion.items()]})
print(f"wrote {len(tensors)} tensors, {len(casts)} casts, {len(rounding)} rounding lists, "
      f"{len(promotion)} promotions")
