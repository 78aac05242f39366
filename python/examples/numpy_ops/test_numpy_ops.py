"""Another implementation tested against lathe: a few ops in NumPy, over every case of them in
lathe's fixtures pack (docs/python.md). Run: PYTHONPATH=build/python pytest python/examples/numpy_ops"""
import lathe
import numpy as np
import pytest


def softmax(x, dim=-1):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


NUMPY = {"add": np.add, "mul": np.multiply, "exp": np.exp, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
         "matmul": np.matmul, "softmax": softmax}


@pytest.mark.lathe_cases(kind="op", op=list(NUMPY), dtype=["f32", "f64"])
def test_numpy_matches_lathe(lathe_case):
    got = NUMPY[lathe_case.op](*[np.asarray(t) for t in lathe_case.inputs()], **lathe_case.args)
    verdict = lathe_case.check({"output": lathe.from_numpy(np.ascontiguousarray(got))})
    assert verdict, verdict.report
