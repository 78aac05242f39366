"""Pairs of results with PyTorch's verdicts, for `lathe ref --check` (tests/test_ref_check.cpp).

    /usr/bin/python3 tests/golden/make_check_pairs.py

Writes check_pairs.got.safetensors and check_pairs.want.safetensors: tensor NAME of one file is
compared with tensor NAME of the other. The want file's metadata "verdicts" holds, per setting
(assert_close's defaults; rtol=0.01 with atol=0.0001; equal_nan), whether
torch.testing.assert_close(got[NAME], want[NAME], ...) passes. The pairs: equal tensors, tensors
within tolerance, tensors at the edge of the tolerance and one representable step beyond it (in
each floating dtype, both directions), NaN and infinities, integers and booleans, and shape and
dtype mismatches. Two names exist in one file only (a missing and an extra tensor); they fail.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_safetensors import save  # noqa: E402

torch.manual_seed(4321)
FLOATS = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
DEFAULT_TOL = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7),
               torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}
INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16,
            torch.float16: torch.int16}


def moved(x, k, direction):
    """x (a one-element tensor, nonzero) moved k representable steps toward +inf (direction 1) or
    -inf (-1); x's sign stays, as long as k is far below x's distance to zero in steps."""
    bits = x.view(INT_VIEW[x.dtype]).clone()
    away = (x.item() > 0) == (direction > 0)  # away from zero when the sign agrees with the direction
    return (bits + k if away else bits - k).view(x.dtype)


def edge(w, direction, rtol, atol):
    """The farthest value from w in `direction` that torch.isclose still accepts, by bisection over
    the representable values."""
    def close(k):
        return bool(torch.isclose(moved(w, k, direction), w, rtol=rtol, atol=atol))
    lo, hi = 0, 1
    while close(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if close(mid) else (lo, mid)
    return moved(w, lo, direction), moved(w, hi, direction)


def pairs():
    got, want = {}, {}
    for name, dt in FLOATS.items():
        rtol, atol = DEFAULT_TOL[dt]
        # |w| in [0.5, 2], either sign: no value near zero, where stepping could cross it
        w = ((torch.rand(64, dtype=torch.float64) * 1.5 + 0.5) * (torch.randint(0, 2, (64,)) * 2 - 1)).to(dt)
        allowed = atol + (rtol * w).abs()
        want[f"{name}.equal"], got[f"{name}.equal"] = w, w.clone()
        want[f"{name}.within"], got[f"{name}.within"] = w, (w.double() + 0.4 * allowed.double()).to(dt)
        for sign, label in ((1, "above"), (-1, "below")):
            inside, outside = zip(*(edge(w[i:i + 1], sign, rtol, atol) for i in range(len(w))))
            want[f"{name}.edge_{label}"], got[f"{name}.edge_{label}"] = w, torch.cat(inside)
            for k in range(4):  # one element a representable step past the edge, the rest on it
                g = torch.cat(inside)
                g[k * 13] = outside[k * 13][0]
                want[f"{name}.hair_{label}_{k}"], got[f"{name}.hair_{label}_{k}"] = w, g
        nan_w = w.clone()
        nan_w[3] = float("nan")
        want[f"{name}.nan_both"], got[f"{name}.nan_both"] = nan_w, nan_w.clone()
        nan_g = w.clone()
        nan_g[5] = float("nan")
        want[f"{name}.nan_got"], got[f"{name}.nan_got"] = w, nan_g
        inf_w = w.clone()
        inf_w[7] = float("inf")
        want[f"{name}.inf_same"], got[f"{name}.inf_same"] = inf_w, inf_w.clone()
        inf_g = inf_w.clone()
        inf_g[7] = -float("inf")
        want[f"{name}.inf_opposite"], got[f"{name}.inf_opposite"] = inf_w, inf_g
        fin_g = inf_w.clone()
        fin_g[7] = torch.finfo(dt).max
        want[f"{name}.inf_vs_max"], got[f"{name}.inf_vs_max"] = inf_w, fin_g
        big = (torch.rand(16, dtype=torch.float64) * 2e4 + 1e3).to(dt)  # relative tolerance dominates
        want[f"{name}.large"], got[f"{name}.large"] = big, (big.double() * (1 + 0.9 * rtol)).to(dt)
    ints = torch.randint(-50, 50, (10,), dtype=torch.int64)
    want["i64.equal"], got["i64.equal"] = ints, ints.clone()
    off = ints.clone()
    off[2] += 1
    want["i64.off_by_one"], got["i64.off_by_one"] = ints, off
    b = torch.rand(8) > 0.5
    want["bool.equal"], got["bool.equal"] = b, b.clone()
    want["bool.flipped"], got["bool.flipped"] = b, ~b
    m = torch.rand(3, 4)
    want["shape.transposed"], got["shape.transposed"] = m, m.t().contiguous()
    want["shape.scalar_vs_1"], got["shape.scalar_vs_1"] = torch.tensor(1.5), torch.tensor([1.5])
    want["dtype.f32_vs_f64"], got["dtype.f32_vs_f64"] = m, m.double()
    want["dtype.bf16_vs_f16"], got["dtype.bf16_vs_f16"] = m.bfloat16(), m.half()
    want["only_in_want"] = m
    got["only_in_got"] = m
    return got, want


def verdict(g, w, **kw):
    if g is None or w is None:
        return False
    try:
        torch.testing.assert_close(g, w, **kw)
        return True
    except AssertionError:
        return False


def main():
    got, want = pairs()
    settings = {"default": {}, "rtol=0.01,atol=0.0001": {"rtol": 1e-2, "atol": 1e-4}, "equal_nan": {"equal_nan": True}}
    names = list(want) + [n for n in got if n not in want]
    verdicts = {s: {n: verdict(got.get(n), want.get(n), **kw) for n in names} for s, kw in settings.items()}
    save(os.path.join(HERE, "check_pairs.got.safetensors"), got)
    save(os.path.join(HERE, "check_pairs.want.safetensors"), want, {"verdicts": verdicts})
    for s, v in verdicts.items():
        print(f"{s}: {sum(v.values())} of {len(v)} pass")


if __name__ == "__main__":
    main()
