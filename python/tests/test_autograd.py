"""requires_grad, backward and .grad from Python: lathe's autograd, unchanged."""
import numpy as np
import pytest

import lathe


def test_backward_fills_the_leaves_grads():
    x = lathe.tensor([[1.0, -2.0], [0.5, 3.0]], dtype="f64", requires_grad=True)
    w = lathe.tensor([[0.25], [-1.5]], dtype="f64", requires_grad=True)
    loss = lathe.tanh(x @ w).sum()
    assert loss.grad_fn == "sum" and x.is_leaf and not loss.is_leaf
    loss.backward()
    a, b = np.asarray(x.detach()), np.asarray(w.detach())
    d = 1 - np.tanh(a @ b) ** 2
    np.testing.assert_allclose(np.asarray(x.grad), d @ b.T, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(w.grad), a.T @ d, rtol=1e-12)


def test_grads_accumulate_and_can_be_cleared():
    x = lathe.tensor([2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [7.0]
    x.grad = None
    assert x.grad is None


def test_no_grad_records_nothing():
    x = lathe.ones(2, requires_grad=True)
    with lathe.no_grad():
        assert not lathe.is_grad_enabled()
        y = x * 2.0
    assert lathe.is_grad_enabled() and not y.requires_grad and y.grad_fn is None


def test_backward_errors_are_lathe_errors():
    x = lathe.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(lathe.Error, match="retain_graph|second|twice|freed"):
        y.backward()
    with pytest.raises(lathe.Error, match="one-element|gradient"):
        (x * 2.0).backward()
    with pytest.raises(lathe.Error):
        lathe.tensor([1, 2]).requires_grad = True


def test_a_gradient_on_the_emulated_device_equals_the_cpus():
    x = lathe.randn((4, 6), seed=5, dtype=lathe.f32)
    xs = x.to("sim").requires_grad_()
    x.requires_grad_()
    lathe.softmax(x, dim=1).log().mean().backward()
    lathe.softmax(xs, dim=1).log().mean().backward()
    assert xs.grad.device == "sim:0"
    assert xs.grad.cpu().tolist() == x.grad.tolist()
