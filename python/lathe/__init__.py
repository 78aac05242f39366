"""lathe from Python: the C++ library's tensors, autograd, ops, models, optimizers and checkpoints.

Everything here is lathe's C++ code (the compiled module ``lathe._lathe``); this file adds only what
Python itself needs: making a tensor from Python data, indexing with ``t[...]``, and NumPy views.
See docs/python.md.
"""
import builtins as _builtins

import numpy as _np

from ._lathe import *  # noqa: F401,F403  (the bindings: Tensor, the dtypes, Device, every op)
from ._lathe import Error, Tensor, __version__, from_numpy  # noqa: F401

__all__ = [name for name in dir() if not name.startswith("_")]

# lathe's names shadow Python's own in this file (sum, max, abs, pow, bool): those are _builtins.*.

# The dtype a Python value becomes when none is given: floats f32 (as torch), integers i64, bools bool.
_DEFAULT_FOR_KIND = {"f": "f32", "i": "i64", "u": "i64", "b": "bool"}
_NUMPY_OF = {"f32": _np.float32, "f64": _np.float64, "f16": _np.float16, "i32": _np.int32,
             "i64": _np.int64, "bool": _np.bool_}


def tensor(data, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of ``data`` (numbers, nested lists, a NumPy array)."""
    array = _np.asarray(data)
    if dtype is None:
        if array.dtype.kind not in _DEFAULT_FOR_KIND:
            raise TypeError(f"lathe.tensor: NumPy dtype {array.dtype} has no lathe dtype")
        dtype = _DEFAULT_FOR_KIND[array.dtype.kind]
    name = str(dtype)
    # bf16 has no NumPy type: the values are rounded once, from f32, by lathe.
    staged = _np.ascontiguousarray(array, dtype=_NUMPY_OF["f32" if name == "bf16" else name])
    out = from_numpy(staged).clone().to(device, name)
    if requires_grad:
        out.requires_grad_()
    return out


def _numpy(self):
    """A NumPy array over this cpu tensor's memory (no copy); ``np.asarray(t)`` is the same."""
    return _np.asarray(self)


def _array(self, dtype=None):
    """NumPy's fallback when the buffer protocol fails (it then tries ``__array__``, and without one
    would make an array of tensor objects): the buffer again, so that its error reaches the caller."""
    array = _np.asarray(memoryview(self))
    return array if dtype is None else array.astype(dtype, copy=False)


def _tolist(self):
    return _np.asarray(self.to("cpu") if self.dtype != bf16 else self.to("cpu").to(f32)).tolist()


def _getitem(self, index):
    """Integers select, slices (positive steps) narrow, ``None`` adds a dim, ``...`` skips dims: views, as in torch."""
    if not isinstance(index, tuple):
        index = (index,)
    if _builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = _builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > self.ndim:
        raise IndexError(f"too many indices for tensor {self.desc()}: {used} given")
    out, dim = self, 0
    for i in index:
        if i is Ellipsis:
            dim += self.ndim - used
        elif i is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(i, slice):
            start, stop, step = i.indices(out.shape[dim])
            if step <= 0:
                raise IndexError("lathe slices step forwards (a view with a negative stride cannot be expressed)")
            out = out.slice(dim, start, _builtins.max(start, stop), step)
            dim += 1
        elif isinstance(i, int) or hasattr(i, "__index__"):
            n = out.shape[dim]
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of range for dim {dim} of size {n} of {self.desc()}")
            out = out.select(dim, k % n)
        else:
            raise TypeError(f"lathe indexes with integers, slices, None and ...; got {type(i).__name__}")
    return out


from . import ref  # noqa: E402  (lathe.ref: the reference harness)

Tensor.numpy = _numpy
Tensor.__array__ = _array
Tensor.tolist = _tolist
Tensor.__getitem__ = _getitem
Tensor.__array_priority__ = 1000  # ndarray + tensor asks the tensor (its __radd__), as torch
