"""The ops of core/ops.h from Python: every one bound, as a function and as a method, with results
equal to the C++ library's (checked against NumPy in f64, where NumPy's arithmetic is the same)."""
import os
import re

import numpy as np
import pytest

import lathe


def ops_h_functions():
    """The functions core/ops.h declares (the op layer's whole list)."""
    src = open(os.path.join(os.environ["LATHE_SOURCE_DIR"], "core", "ops.h")).read()
    names = set(re.findall(r"^(?:Tensor|std::vector<Tensor>|void) (\w+)\(", src, re.M))
    return sorted(names - {"adam_update", "adam_update_multi",  # the optimizers' kernels (lathe.optim)
                           "check_same_device", "check_floating", "check_op_dtype"})  # argument checks


@pytest.mark.parametrize("name", ops_h_functions())
def test_every_function_of_core_ops_h_is_bound(name):
    assert callable(getattr(lathe, name, None)), f"core/ops.h's {name} has no binding in python/core_ops.cpp"


def f64(*shape, seed=0, lo=-2.0, hi=2.0):
    return lathe.rand(shape, seed=seed, dtype=lathe.f64) * (hi - lo) + lo


def test_elementwise_ops_match_numpy_bit_for_bit_in_f64_where_both_round_once():
    x, y = f64(3, 4, seed=1), f64(4, seed=2, lo=0.5, hi=2.0)
    a, b = np.asarray(x), np.asarray(y)
    for got, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b), (-x, -a),
                      (x + 1.5, a + 1.5), (2.0 - x, 2.0 - a), (3.0 * x, 3.0 * a), (1.0 / y, 1.0 / b),
                      (lathe.sqrt(y), np.sqrt(b)), (x.abs(), np.abs(a)), (lathe.square(x), a * a),
                      (lathe.maximum(x, y), np.maximum(a, b)), (lathe.relu(x), np.maximum(a, 0)),
                      (lathe.clamp(x, min=-0.5, max=1.0), np.clip(a, -0.5, 1.0))]:
        assert np.array_equal(np.asarray(got), want)


def test_transcendental_ops_match_numpy_to_a_few_ulps():
    x = f64(5, 7, seed=3)
    a = np.asarray(x)
    for got, want in [(x.exp(), np.exp(a)), (lathe.tanh(x), np.tanh(a)), (lathe.sigmoid(x), 1 / (1 + np.exp(-a))),
                      (lathe.silu(x), a / (1 + np.exp(-a))), (lathe.log(x.abs() + 0.1), np.log(np.abs(a) + 0.1)),
                      (lathe.softmax(x, dim=1), np.exp(a) / np.exp(a).sum(1, keepdims=True)),
                      (x ** 2.0, a ** 2)]:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=1e-15)


def test_comparisons_and_where_give_bool_tensors():
    x = lathe.tensor([1.0, 2.0, 3.0])
    assert (x > 1.5).dtype == lathe.bool and (x > 1.5).tolist() == [False, True, True]
    assert (x == lathe.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert lathe.where(x < 2.5, x, lathe.zeros(3)).tolist() == [1.0, 2.0, 0.0]
    assert len({x, x[0:2]}) == 2  # tensors hash by identity although == compares elements


def test_reductions_products_and_norms():
    x = f64(2, 3, 4, seed=4)
    a = np.asarray(x)
    np.testing.assert_allclose(np.asarray(x.sum()), a.sum(), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(x.sum(dim=[0, 2], keepdim=True)), a.sum((0, 2), keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(lathe.mean(x, 1)), a.mean(1), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(x.var(dim=2, correction=0)), a.var(2), rtol=1e-13)
    assert np.array_equal(np.asarray(x.max(dim=1)), a.max(1))
    assert np.asarray(x.argmax(2)).tolist() == a.argmax(2).tolist()
    w = f64(4, 5, seed=5)
    np.testing.assert_allclose(np.asarray(x @ w), a @ np.asarray(w), rtol=1e-14)
    g, b = f64(4, seed=6), f64(4, seed=7)
    ln = lathe.layer_norm(x, g, b, eps=1e-5)
    mu, var = a.mean(-1, keepdims=True), a.var(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(ln), (a - mu) / np.sqrt(var + 1e-5) * np.asarray(g) + np.asarray(b),
                               rtol=1e-12, atol=1e-14)
    rn = lathe.rms_norm(x, eps=1e-6)
    np.testing.assert_allclose(np.asarray(rn), a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6), rtol=1e-13)


def test_joins_splits_lookups_and_losses():
    x, y = lathe.arange(6, dtype=lathe.f32).reshape(2, 3), lathe.ones(2, 1)
    assert lathe.cat([x, y], dim=1).shape == (2, 4)
    assert lathe.stack([x, x]).shape == (2, 2, 3)
    assert [p.tolist() for p in x.split(2, dim=1)] == [[[0.0, 1.0], [3.0, 4.0]], [[2.0], [5.0]]]
    assert lathe.index_select(x, 1, lathe.tensor([2, 0])).tolist() == [[2.0, 0.0], [5.0, 3.0]]
    assert lathe.embedding(x, lathe.tensor([1, 1, 0])).shape == (3, 3)
    logits, targets = f64(4, 5, seed=8), lathe.tensor([0, 4, 2, 1])
    a = np.asarray(logits)
    want = -(a - np.log(np.exp(a).sum(1, keepdims=True)))[np.arange(4), [0, 4, 2, 1]].mean()
    np.testing.assert_allclose(lathe.cross_entropy(logits, targets).item(), want, rtol=1e-14)
    gen = lathe.Generator(seed=3)
    d = lathe.dropout(lathe.ones(1000), 0.5, True, gen)
    assert gen.offset > 0 and set(np.unique(np.asarray(d)).tolist()) == {0.0, 2.0}


def test_op_errors_name_the_op_and_the_tensors():
    with pytest.raises(lathe.Error, match=r"matmul.*f32\[2, 3\].*f32\[2, 3\]"):
        lathe.zeros(2, 3) @ lathe.zeros(2, 3)
    with pytest.raises(lathe.Error, match="embedding"):
        lathe.embedding(lathe.zeros(3, 2), lathe.tensor([5]))
    with pytest.raises(lathe.Error, match="layer_norm"):
        lathe.layer_norm(lathe.zeros(2, 3), lathe.zeros(4))
    with pytest.raises(TypeError):
        lathe.exp("x")


# Each op as a function and as a method, against lathe's own reference harness (the op registry's
# call, with PyTorch's names and arguments) where it has the op, else against NumPy in f64.
REF_UNARY = [o["name"] for o in lathe.ref.ops() if o["ref_kind"] and o["operands"] == (1, 1) and not o["args"]]


@pytest.mark.parametrize("name", sorted(REF_UNARY))
def test_unary_ops_are_the_registrys(name):
    x = f64(3, 5, seed=11, lo=0.1, hi=2.0)
    want = lathe.ref.run({"kind": "op", "op": name}, {"input.0": x})["output"]
    assert getattr(lathe, name)(x).tolist() == want.tolist() == getattr(x, name)().tolist()


def test_gelu_both_forms_are_the_registrys():
    x = f64(3, 5, seed=12)
    for fn, approximate in ((lathe.gelu, "tanh"), (lathe.gelu_erf, "none")):
        want = lathe.ref.run({"kind": "op", "op": "gelu", "args": {"approximate": approximate}}, {"input.0": x})
        assert fn(x).tolist() == want["output"].tolist()
    assert x.gelu().tolist() == lathe.gelu(x).tolist() and x.gelu_erf().tolist() == lathe.gelu_erf(x).tolist()


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_ops_are_the_registrys(name):
    x, y = f64(3, 4, seed=13, lo=0.5, hi=2.0), f64(4, seed=14, lo=0.5, hi=2.0)
    want = lathe.ref.run({"kind": "op", "op": name}, {"input.0": x, "input.1": y})["output"]
    assert getattr(lathe, name)(x, y).tolist() == want.tolist() == getattr(x, name)(y).tolist()


def test_comparisons_as_functions_methods_and_operators():
    x, y = lathe.tensor([1.0, 2.0, 3.0]), lathe.tensor([2.0, 2.0, 2.0])
    for name, op, want in (("eq", "__eq__", [False, True, False]), ("ne", "__ne__", [True, False, True]),
                           ("lt", "__lt__", [True, False, False]), ("le", "__le__", [True, True, False]),
                           ("gt", "__gt__", [False, False, True]), ("ge", "__ge__", [False, True, True])):
        assert getattr(lathe, name)(x, y).tolist() == getattr(x, name)(y).tolist() == getattr(x, op)(y).tolist() == want
        assert getattr(lathe, name)(x, 2.0).tolist() == want


def test_nn_ops_are_the_registrys():
    x = f64(2, 7, seed=15)
    assert lathe.log_softmax(x, dim=1).tolist() == x.log_softmax(1).tolist() == lathe.ref.run(
        {"kind": "op", "op": "log_softmax", "args": {"dim": 1}}, {"input.0": x})["output"].tolist()
    mask = lathe.tensor([True, False] * 7).reshape(2, 7)
    assert lathe.masked_fill(x, mask, -1.0).tolist() == x.masked_fill(mask, -1.0).tolist() == lathe.ref.run(
        {"kind": "op", "op": "masked_fill", "args": {"value": -1.0}}, {"input.0": x, "input.1": mask})["output"].tolist()
    idx = lathe.tensor([[0, 6], [3, 3]])
    assert lathe.gather(x, 1, idx).tolist() == x.gather(1, idx).tolist() == lathe.ref.run(
        {"kind": "op", "op": "gather", "args": {"dim": 1}}, {"input.0": x, "input.1": idx})["output"].tolist()
    q, k, v = (f64(1, 2, 5, 4, seed=s) for s in (16, 17, 18))
    want = lathe.ref.run({"kind": "op", "op": "scaled_dot_product_attention", "args": {"is_causal": True, "scale": 0.5}},
                         {"input.0": q, "input.1": k, "input.2": v})["output"]
    assert lathe.causal_attention(q, k, v, 0.5).tolist() == q.causal_attention(k, v, 0.5).tolist() == want.tolist()
    qkv = lathe.cat([t.transpose(1, 2).reshape(1, 5, 8) for t in (q, k, v)], dim=2)
    got = lathe.causal_attention_qkv(qkv, 2, 0.5)
    assert got.shape == (1, 5, 8) and qkv.causal_attention_qkv(2, 0.5).tolist() == got.tolist()
    np.testing.assert_allclose(np.asarray(got), np.asarray(want.transpose(1, 2).reshape(1, 5, 8)), rtol=1e-13)
    logits, targets = f64(6, 5, seed=19), lathe.tensor([0, 1, 2, 3, 4, 0])
    assert lathe.fused_cross_entropy(logits, targets).item() == pytest.approx(lathe.cross_entropy(logits, targets).item(),
                                                                               rel=1e-14)
    assert logits.fused_cross_entropy(targets).item() == lathe.fused_cross_entropy(logits, targets).item()


def test_ops_without_a_torch_twin_against_numpy():
    x = f64(3, 4, seed=20, lo=-3, hi=3)
    a = np.asarray(x)
    np.testing.assert_allclose(np.asarray(lathe.softcap(x, 2.0)), 2.0 * np.tanh(a / 2.0), rtol=1e-15)
    assert x.softcap(2.0).tolist() == lathe.softcap(x, 2.0).tolist()
    assert np.array_equal(np.asarray(lathe.squared_relu(x)), np.maximum(a, 0) ** 2)
    assert x.squared_relu().tolist() == lathe.squared_relu(x).tolist()
    h = f64(1, 2, 3, 4, seed=21)
    ang = f64(3, 2, seed=22)
    c, s = np.cos(np.asarray(ang)), np.sin(np.asarray(ang))
    cos, sin = lathe.from_numpy(np.ascontiguousarray(c)), lathe.from_numpy(np.ascontiguousarray(s))
    hv = np.asarray(h)
    x1, x2 = hv[..., :2], hv[..., 2:]
    want = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    np.testing.assert_allclose(np.asarray(lathe.rope(h, cos, sin)), want, rtol=1e-14, atol=1e-15)
    assert h.rope(cos, sin).tolist() == lathe.rope(h, cos, sin).tolist()
