"""Golden values for tests/test_dtypes.cpp, computed by PyTorch: ops in the 16-bit floats and across
dtypes, casts, roundings and type promotion. (The op registry's goldens are tools/make_op_goldens.sh's.)

    /usr/bin/python3 tests/golden/make_core_goldens.py

Writes core_ops.safetensors next to this script (golden_safetensors.py: the one golden format).
Names are "<case>.<tensor>", in the order the case made them: the inputs (a, b, x, cond, idx, ...),
"out" (the forward result). The C++ test applies the same function to the same inputs; a case's
function is written once here and once there, under the same name.

Also written: casts of a list of values between all 7 dtypes ("cast.<from>.<to>.src/dst"; torch's
rounding, including bf16 and f16 ties to even), roundings to the 16-bit floats
("round.<from>.<to>.src/dst"), and torch.result_type for every pair of dtypes (metadata
"promotions", JSON [[a, b, result], ...]).
"""
import os

import torch

import golden_safetensors

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


def run(case, fn, inputs):
    """Stores the inputs and fn(**inputs)."""
    for name, t in inputs.items():
        put(f"{case}.{name}", t)
    put(f"{case}.out", fn(**inputs))


r = torch.randn


def away_from_zero(*shape):
    x = r(*shape)
    return x.sign() * (x.abs() + 0.5)


# ---- integer ops ----
IA = torch.tensor([7, -7, 9, 0, 5], dtype=torch.int64)
IB = torch.tensor([2, 2, -4, 3, 5], dtype=torch.int64)
run("int_div", lambda a, b: a / b, {"a": IA, "b": IB})  # true division: f32

# ---- 16-bit floats and mixed dtypes (tests/test_dtypes.cpp; "dt_" cases) ----
H = r(3, 4)
run("dt_bf16_add", lambda a, b: a + b, {"a": H.bfloat16(), "b": r(4).bfloat16()})
run("dt_bf16_mul_scalar", lambda x: x * 0.1, {"x": H.bfloat16()})
run("dt_bf16_add_scalar", lambda x: x + 1.001, {"x": H.bfloat16()})
run("dt_f16_div", lambda a, b: a / b, {"a": H.half(), "b": away_from_zero(3, 1).half()})
run("dt_f16_mul_scalar", lambda x: x * 0.1, {"x": H.half()})
run("dt_bf16_exp", lambda x: torch.exp(x), {"x": H.bfloat16()})
run("dt_bf16_sum", lambda x: x.sum(dim=1), {"x": r(3, 40).bfloat16()})
run("dt_bf16_f32_mul", lambda a, b: a * b, {"a": H.bfloat16(), "b": r(3, 1)})
run("dt_f16_bf16_add", lambda a, b: a + b, {"a": H.half(), "b": r(4).bfloat16()})
run("dt_i32_f16_mul", lambda a, b: a * b, {"a": torch.tensor([1, -2, 300], dtype=torch.int32),
                                           "b": torch.tensor([0.5, 0.25, 300.0]).half()})
run("dt_i64_i32_add", lambda a, b: a + b, {"a": torch.tensor([1, -2, 3 * 2**40]),
                                           "b": torch.tensor([7, 2**31 - 1, 5], dtype=torch.int32)})
run("dt_bool_i32_add", lambda a, b: a + b, {"a": torch.tensor([True, False, True]),
                                            "b": torch.tensor([3, 4, -5], dtype=torch.int32)})

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
