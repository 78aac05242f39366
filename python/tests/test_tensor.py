"""lathe.Tensor from Python: creation, metadata, views and indexing, moves and casts, errors."""
import numpy as np
import pytest

import lathe


def test_creation_functions_give_the_shape_dtype_and_device_asked_for():
    assert lathe.zeros(2, 3).shape == (2, 3)
    assert lathe.zeros((2, 3)).shape == (2, 3)
    z = lathe.ones(4, dtype=lathe.f64, device="sim:1")
    assert (z.dtype, str(z.device)) == (lathe.f64, "sim:1")
    assert lathe.full((2,), 1.5, dtype="bf16").tolist() == [1.5, 1.5]
    assert lathe.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert lathe.arange(2, 8, 3).tolist() == [2, 5]
    assert lathe.arange(3).dtype == lathe.i64


def test_random_tensors_depend_only_on_seed_and_offset_on_every_device():
    a = lathe.randn((3, 5), seed=7)
    b = lathe.randn((3, 5), seed=7, device="sim").to("cpu")
    assert a.tolist() == b.tolist()
    assert a.tolist() != lathe.randn((3, 5), seed=7, offset=1).tolist()
    r = lathe.randint(0, 10, (100,), seed=1)
    assert r.dtype == lathe.i64 and 0 <= min(r.tolist()) and max(r.tolist()) < 10


def test_tensor_from_python_data_picks_torchs_default_dtypes():
    assert lathe.tensor([1.0, 2.0]).dtype == lathe.f32
    assert lathe.tensor([1, 2]).dtype == lathe.i64
    assert lathe.tensor([True, False]).dtype == lathe.bool
    t = lathe.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="f64", requires_grad=True)
    assert t.dtype == lathe.f64 and t.requires_grad and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    # bf16 rounds once to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7, and goes to 1
    assert lathe.tensor([1 + 2**-8, 1 + 3 * 2**-8], dtype="bf16").tolist() == [1.0, 1 + 2**-6]


def test_metadata_matches_the_c_plus_plus_tensor():
    t = lathe.zeros(2, 3, 4)
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and len(t) == 2
    assert t.strides == (12, 4, 1) and t.size(1) == 3 and t.size() == (2, 3, 4)
    assert t.nbytes == 96 and t.is_contiguous()
    assert t.desc() == "f32[2, 3, 4] on cpu"
    assert "lathe.Device('cpu')" == repr(t.device) and t.device == "cpu"
    assert lathe.f32.itemsize == 4 and lathe.bf16.is_floating_point and not lathe.i32.is_floating_point


def test_views_share_memory_and_indexing_follows_torch():
    t = lathe.arange(24, dtype=lathe.f32).reshape(2, 3, 4)
    assert t[1].tolist() == np.arange(12, 24).reshape(3, 4).tolist()
    assert t[:, 1, ::2].tolist() == [[4.0, 6.0], [16.0, 18.0]]
    assert t[..., -1].tolist() == [[3.0, 7.0, 11.0], [15.0, 19.0, 23.0]]
    assert t[None, 0].shape == (1, 3, 4)
    assert t.transpose(0, 2).strides == (1, 4, 12)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    v = t[0, 0]
    v.fill_(-1)
    assert t[0, 0].tolist() == [-1.0] * 4  # a view writes through
    with pytest.raises(IndexError, match="out of range"):
        t[2]
    with pytest.raises(IndexError, match="negative stride"):
        t[::-1]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]


def test_to_moves_and_casts_by_name_or_by_value():
    t = lathe.tensor([1.5, -2.25])
    assert t.to("f64").dtype == lathe.f64
    assert t.to(lathe.bf16).dtype == lathe.bf16
    s = t.to("sim:0", "f16")
    assert (str(s.device), s.dtype) == ("sim:0", lathe.f16)
    assert s.cpu().tolist() == [1.5, -2.25]
    assert t.to(lathe.Device("sim:1")).device.index == 1
    assert lathe.tensor([3.0]).item() == 3.0 and isinstance(lathe.tensor([3]).item(), int)
    assert lathe.tensor([True]).item() is True


def test_bad_input_raises_lathe_error_with_lathes_message():
    with pytest.raises(lathe.Error, match="unknown dtype|dtype"):
        lathe.zeros(2, dtype="f8")
    with pytest.raises(lathe.Error, match="sim:7"):
        lathe.zeros(2, device="sim:7")
    with pytest.raises(lathe.Error, match=r"add: shapes \[2\] and \[3\] cannot be broadcast"):
        lathe.zeros(2) + lathe.zeros(3)
    with pytest.raises(lathe.Error, match="cpu.*sim|sim.*cpu"):
        lathe.zeros(2) + lathe.zeros(2, device="sim")
    with pytest.raises(lathe.Error, match="view"):
        lathe.zeros(2, 3).view(4)
    with pytest.raises(lathe.Error, match="one-element|item"):
        lathe.zeros(2).item()
    with pytest.raises(TypeError, match="device or a dtype"):
        lathe.zeros(2).to(3.5)
    with pytest.raises(lathe.Error, match="requires_grad"):
        lathe.zeros(2, dtype=lathe.i64).requires_grad_()
    if not lathe.cuda_is_available():
        with pytest.raises(lathe.Error, match="cuda"):
            lathe.zeros(2, device="cuda")
    assert issubclass(lathe.Error, RuntimeError)


def test_repr_prints_as_lathe_prints():
    assert "1.5" in repr(lathe.tensor([1.5]))


def test_view_methods_and_in_place_writes():
    t = lathe.arange(12, dtype=lathe.f32).reshape(3, 4)
    assert t.narrow(1, 1, 2).tolist() == [[1, 2], [5, 6], [9, 10]]
    assert t.select(0, 2).tolist() == [8, 9, 10, 11] and t.slice(1, 0, 4, 2).tolist() == [[0, 2], [4, 6], [8, 10]]
    assert t.flatten().shape == (12,) and t.unsqueeze(0).shape == (1, 3, 4) and t.unsqueeze(0).squeeze().shape == (3, 4)
    assert t[:, :1].squeeze(1).tolist() == [0, 4, 8]
    e = lathe.ones(1, 4).expand(3, 4)
    assert e.strides == (0, 1) and not e.is_contiguous() and e.contiguous().is_contiguous()
    assert t[1:].storage_offset == 4
    v0 = t.version()
    t[0].copy_(lathe.tensor([9.0, 9.0, 9.0, 9.0]))
    assert t.version() > v0 and t[0].tolist() == [9.0] * 4
    v1 = t.version()
    t.bump_version()
    assert t.version() == v1 + 1
    assert lathe.empty(2, 3, dtype="i32").dtype == lathe.i32
    assert lathe.scalar_tensor(2.5, dtype=lathe.f64).shape == () and lathe.scalar_tensor(2.5).item() == 2.5


def test_types_devices_and_memory_figures():
    assert isinstance(lathe.f32, lathe.DType) and str(lathe.bf16) == "bf16"
    d = lathe.Device("sim:1")
    assert d.type == "sim" and d.index == 1 and lathe.Device("cpu").type == "cpu" and hash(d) == hash(lathe.Device("sim:1"))
    lathe.reset_peak_memory("sim:1")
    x = lathe.zeros(1 << 16, device="sim:1")
    lathe.synchronize("sim:1")
    stats = lathe.memory_stats("sim:1")
    assert stats["peak_allocated"] >= x.nbytes and stats["allocated"] >= x.nbytes
    g = lathe.Generator(seed=1)
    g.set_state(5, 100)
    assert (g.seed, g.offset) == (5, 100)
    assert "tiny" in lathe.gpt_presets()
