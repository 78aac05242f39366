"""Memory shared with NumPy without copies, both ways: the buffer protocol and DLPack.

Each side keeps the other's memory alive: every test below frees the side that made the memory
first and reads it through the other. Torch is not needed: NumPy speaks DLPack too.
"""
import gc

import numpy as np
import pytest

import lathe

NUMPY_DTYPES = [(lathe.f32, np.float32), (lathe.f64, np.float64), (lathe.f16, np.float16),
                (lathe.i32, np.int32), (lathe.i64, np.int64), (lathe.bool, np.bool_)]


@pytest.mark.parametrize("dtype,np_dtype", NUMPY_DTYPES, ids=lambda x: str(x))
def test_numpy_sees_a_tensors_memory_and_the_tensor_sees_numpys(dtype, np_dtype):
    t = lathe.arange(6, dtype=lathe.f32).reshape(2, 3).to(dtype)
    a = np.asarray(t)
    assert a.dtype == np_dtype and a.shape == (2, 3)
    assert a.__array_interface__["data"][0] == np.asarray(t).__array_interface__["data"][0]
    b = np.arange(6).reshape(2, 3).astype(np_dtype)
    u = lathe.from_numpy(b)
    assert u.dtype == dtype and u.shape == (2, 3)
    assert np.asarray(u).__array_interface__["data"][0] == b.__array_interface__["data"][0]


def test_writes_show_on_both_sides():
    t = lathe.zeros(3)
    a = t.numpy()
    a[1] = 5
    assert t.tolist() == [0.0, 5.0, 0.0]
    b = np.zeros(3, dtype=np.float32)
    u = lathe.from_numpy(b)
    u.fill_(2)
    assert b.tolist() == [2.0, 2.0, 2.0]


def test_strides_and_views_cross_as_they_are():
    t = lathe.arange(12, dtype=lathe.f32).reshape(3, 4).transpose(0, 1)[1:, ::2]
    a = np.asarray(t)
    assert a.strides == tuple(4 * s for s in t.strides)
    assert a.tolist() == t.tolist()
    b = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, 1::2].T
    u = lathe.from_numpy(b)
    assert u.strides == tuple(s // 8 for s in b.strides) and u.tolist() == b.tolist()
    assert not u.is_contiguous()
    assert (lathe.from_numpy(np.ones((1, 3), np.float32)).strides[1]) == 1


def test_the_array_outlives_the_tensor_and_the_tensor_outlives_the_array():
    t = lathe.arange(1000, dtype=lathe.f32)
    a = np.asarray(t)
    del t
    gc.collect()
    lathe.zeros(1000).fill_(9)  # reuse freed memory, if it had been freed
    assert a[999] == 999
    b = np.arange(1000, dtype=np.float32)
    u = lathe.from_numpy(b)
    del b
    gc.collect()
    np.full(1000, 9, dtype=np.float32)
    assert u[999].item() == 999
    # the array's memory goes when the last tensor over it goes, views included
    c = np.arange(10, dtype=np.float32)
    before = c.__array_interface__["data"][0]
    v = lathe.from_numpy(c)[2:4]
    del c
    gc.collect()
    assert v.tolist() == [2.0, 3.0] and before


def test_memory_lent_to_lathe_cannot_be_freed_under_it():
    # The tensor holds the exporter's buffer view: NumPy and Python refuse to resize (free) it.
    a = np.zeros(4, np.float32)
    t = lathe.from_numpy(a)
    with pytest.raises(ValueError, match="referenced|reference"):
        a.resize(1000)
    b = bytearray(16)
    u = lathe.from_numpy(memoryview(b).cast("f"))
    with pytest.raises(BufferError):
        b.extend(b"x" * 4096)
    del t, u
    gc.collect()
    a.resize(1000)  # released with the last tensor
    b.extend(b"x" * 4096)


def test_what_cannot_be_shared_says_why():
    with pytest.raises(lathe.Error, match="bf16 has no NumPy dtype"):
        np.asarray(lathe.zeros(2, dtype=lathe.bf16))
    with pytest.raises(lathe.Error, match=r"f32\[2\] on sim:0 is not on the cpu"):
        np.asarray(lathe.zeros(2, device="sim"))
    with pytest.raises(lathe.Error, match="read-only"):
        ro = np.zeros(3, np.float32)
        ro.flags.writeable = False
        lathe.from_numpy(ro)
    with pytest.raises(lathe.Error, match="layout lathe cannot express"):
        lathe.from_numpy(np.zeros(4, np.float32)[::-1])
    with pytest.raises(lathe.Error, match="no lathe dtype"):
        lathe.from_numpy(np.zeros(3, np.uint8))
    with pytest.raises(lathe.Error, match="no lathe dtype"):
        lathe.from_numpy(np.zeros(3, np.complex64))
    with pytest.raises(lathe.Error, match="no lathe dtype"):
        lathe.from_numpy(np.zeros(3, ">f4"))  # not the machine's byte order
    with pytest.raises(lathe.Error, match="emulated accelerator"):
        lathe.zeros(2, device="sim").__dlpack__()


@pytest.mark.parametrize("dtype,np_dtype", NUMPY_DTYPES[:5], ids=lambda x: str(x))
def test_dlpack_both_ways_with_numpy(dtype, np_dtype):
    t = lathe.arange(6, dtype=lathe.f32).reshape(2, 3).to(dtype)
    a = np.from_dlpack(t)
    assert a.dtype == np_dtype and a.tolist() == t.tolist()
    assert a.__array_interface__["data"][0] == np.asarray(t).__array_interface__["data"][0]
    del t
    gc.collect()
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    b = np.arange(12).reshape(3, 4).astype(np_dtype)[:, 1::2]
    u = lathe.from_dlpack(b)
    assert u.dtype == dtype and u.strides == (4, 2) and u.tolist() == b.tolist()
    del b
    gc.collect()
    assert u.tolist() == [[1, 3], [5, 7], [9, 11]]


def test_dlpack_carries_bf16_and_a_capsule_is_consumed_once():
    t = lathe.tensor([1.0, 2.5, -3.0], dtype="bf16")
    capsule = t.__dlpack__()
    u = lathe.from_dlpack(capsule)
    assert u.dtype == lathe.bf16 and u.tolist() == [1.0, 2.5, -3.0]
    u.fill_(7)
    assert t.tolist() == [7.0, 7.0, 7.0]  # the same memory
    with pytest.raises(lathe.Error, match="unconsumed"):
        lathe.from_dlpack(capsule)
    assert t.__dlpack_device__() == (1, 0)
    # the array API's keywords: a newer version asked for, the device named, a copy
    v = lathe.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True))
    v.fill_(1)
    assert t.tolist() == [7.0, 7.0, 7.0] and v.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(lathe.Error, match="not on DLPack device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(lathe.Error, match="__dlpack__"):
        lathe.from_dlpack([1, 2])
    del t, u  # an unconsumed capsule frees what it holds when it goes
    lathe.zeros(3).__dlpack__()
    gc.collect()


def test_torch_shares_through_dlpack_when_it_is_installed():
    torch = pytest.importorskip("torch")
    t = lathe.tensor([1.0, 2.0], dtype="bf16")
    x = torch.from_dlpack(t)
    assert x.dtype == torch.bfloat16 and x.tolist() == [1.0, 2.0]
    y = torch.arange(4, dtype=torch.float32)
    u = lathe.from_dlpack(y)
    y[0] = 9
    assert u.tolist() == [9.0, 1.0, 2.0, 3.0]
