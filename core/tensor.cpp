#include "core/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"

namespace lathe {

// ---------------------------------------------------------------- construction

Tensor make_tensor(const Shape& shape, const Strides& strides, int64_t offset, DType dtype,
                   StoragePtr storage) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

namespace {
void check_shape(const Shape& shape, const char* op) {
  for (int64_t d : shape)
    LATHE_CHECK(d >= 0, op, ": negative dimension in shape ", shape_str(shape));
}

// A view of `t` with new geometry, sharing its storage; no autograd.
Tensor restride(const Tensor& t, const Shape& shape, const Strides& strides, int64_t offset) {
  return make_tensor(shape, strides, offset, t.dtype(), t.storage());
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape, "empty");
  size_t nbytes = 0;
  LATHE_CHECK(!__builtin_mul_overflow(size_t(numel_of(shape)), dtype_size(dtype), &nbytes), "empty: ",
              dtype_name(dtype), shape_str(shape), " needs more bytes than a 64-bit size can hold");
  auto storage = std::make_shared<Storage>(nbytes, device);
  return make_tensor(shape, contiguous_strides(shape), 0, dtype, std::move(storage));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) backend_for(device).fill(t, value);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t start, int64_t end, int64_t step, DType dtype, Device device) {
  LATHE_CHECK(step != 0, "arange: step must not be 0");
  int64_t n = std::max<int64_t>(0, (end - start + step + (step > 0 ? -1 : 1)) / step);
  Tensor t = empty({n}, dtype, device);
  if (n > 0) backend_for(device).arange(t, double(start), double(step));
  return t;
}

Tensor Tensor::from_bytes(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor host = empty(shape, dtype, Device::cpu());
  if (host.nbytes()) std::memcpy(host.data_ptr(), data, host.nbytes());
  return device.is_cpu() ? host : host.to(device);
}

Tensor Tensor::rand(const Shape& shape, uint64_t seed, uint64_t offset, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) backend_for(device).random_uniform(t, seed, offset, 0.0, 1.0);
  return t;
}

Tensor Tensor::randn(const Shape& shape, uint64_t seed, uint64_t offset, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) backend_for(device).random_normal(t, seed, offset, 0.0, 1.0);
  return t;
}

Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, uint64_t seed, uint64_t offset,
                       DType dtype, Device device) {
  LATHE_CHECK(high > low, "randint: high (", high, ") must be greater than low (", low, ")");
  LATHE_CHECK(is_integral(dtype), "randint: dtype must be i32 or i64, got ", dtype_name(dtype));
  // Integers are drawn on the host from the same counter stream, then moved: identical everywhere.
  int64_t n = numel_of(shape);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = low + int64_t(philox_below(seed, offset + uint64_t(i), uint64_t(high - low)));
  Tensor t = from_vector(v, shape);
  if (dtype != DType::i64) t = t.to(dtype);
  return device.is_cpu() ? t : t.to(device);
}

// ---------------------------------------------------------------- metadata

int64_t Tensor::size(int64_t d) const { return shape()[size_t(wrap_dim(d, dim(), "size"))]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

std::string Tensor::desc() const {
  if (!defined()) return "undefined tensor";
  return detail::cat(dtype_name(dtype()), shape_str(shape()), " on ", device());
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(storage()->data()) + offset() * int64_t(dtype_size(dtype()));
}

// ---------------------------------------------------------------- views

namespace {

// `requested` with its -1 dim (if any) inferred for a tensor of t's size; errors name the shape.
Shape resolve_view_shape(const Tensor& t, const Shape& requested) {
  Shape shape = requested;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LATHE_CHECK(infer < 0, "view: only one dimension can be -1 in ", shape_str(requested));
      infer = int64_t(i);
    } else {
      LATHE_CHECK(shape[i] >= 0, "view: invalid shape ", shape_str(requested));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    LATHE_CHECK(known != 0 && t.numel() % known == 0, "view: shape ", shape_str(requested),
                " is invalid for a tensor of ", t.numel(), " elements ", t.desc());
    shape[size_t(infer)] = t.numel() / known;
  }
  LATHE_CHECK(numel_of(shape) == t.numel(), "view: shape ", shape_str(requested), " is invalid for ", t.desc(),
              " (", t.numel(), " elements)");
  return shape;
}

// The strides that show t as `shape` (same element count) without copying, or nullopt when its
// layout does not allow it. Groups of dims that are contiguous among themselves can be split or
// merged, as PyTorch's computeStride does.
std::optional<Strides> view_strides(const Tensor& t, const Shape& shape) {
  if (t.numel() == 0 || t.is_contiguous()) return contiguous_strides(shape);
  Strides new_strides(shape.size());
  const Shape& os = t.shape();
  const Strides& ost = t.strides();
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(os.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= os[size_t(tensor_d)];
    if (tensor_d == 0 ||
        (os[size_t(tensor_d - 1)] != 1 && ost[size_t(tensor_d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        new_strides[size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= shape[size_t(view_d)];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = ost[size_t(tensor_d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// The view itself, an autograd op whose backward reshapes the gradient back.
Tensor make_view(const Tensor& t, const Shape& shape, const Strides& strides) {
  Tensor out = restride(t, shape, strides, t.offset());
  return record("view", out, {t}, [in_shape = t.shape()](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

}  // namespace

Tensor Tensor::view(const Shape& shape_in) const {
  const Shape shape = resolve_view_shape(*this, shape_in);
  const std::optional<Strides> strides = view_strides(*this, shape);
  LATHE_CHECK(strides.has_value(), "view: ", desc(), " with strides ", shape_str(this->strides()),
              " cannot be viewed as ", shape_str(shape), "; use reshape (which copies)");
  return make_view(*this, shape, *strides);
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  const Shape shape = resolve_view_shape(*this, shape_in);
  if (const std::optional<Strides> strides = view_strides(*this, shape)) return make_view(*this, shape, *strides);
  return contiguous().view(shape);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  LATHE_CHECK(int64_t(dims.size()) == dim(), "permute: ", dims.size(), " dims given for ", desc());
  Shape s(dims.size());
  Strides st(dims.size());
  std::vector<int64_t> inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    LATHE_CHECK(inverse[size_t(d)] < 0, "permute: dim ", d, " repeated in the permutation");
    inverse[size_t(d)] = int64_t(i);
    s[i] = shape()[size_t(d)];
    st[i] = strides()[size_t(d)];
  }
  Tensor out = restride(*this, s, st, offset());
  return record("permute", out, {*this}, [inverse](const Tensor& g) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  std::vector<int64_t> p(static_cast<size_t>(dim()));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[size_t(d0)], p[size_t(d1)]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  LATHE_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = shape()[size_t(d)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape();
  Strides st = strides();
  s[size_t(d)] = (end - start + step - 1) / step;
  st[size_t(d)] *= step;
  Tensor out = restride(*this, s, st, offset() + start * strides()[size_t(d)]);
  Shape in_shape = shape();
  return record("slice", out, {*this}, [in_shape, d, start, end, step](const Tensor& g) {
    Tensor gx = Tensor::zeros(in_shape, g.dtype(), g.device());
    gx.slice(d, start, end, step).copy_(g);
    return std::vector<Tensor>{gx};
  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  int64_t dd = wrap_dim(d, dim(), "narrow");
  int64_t n = shape()[size_t(dd)];
  LATHE_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ",
              start + length, ") is out of bounds for dim ", dd, " of ", desc());
  return slice(dd, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  int64_t dd = wrap_dim(d, dim(), "select");
  int64_t n = shape()[size_t(dd)];
  LATHE_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", dd,
              " of ", desc());
  if (index < 0) index += n;
  return narrow(dd, index, 1).squeeze(dd);
}

Tensor Tensor::expand(const Shape& shape_in) const {
  LATHE_CHECK(shape_in.size() >= shape().size(), "expand: cannot expand ", desc(), " to ",
              shape_str(shape_in), " (fewer dims)");
  size_t lead = shape_in.size() - shape().size();
  Shape s(shape_in.size());
  Strides st(shape_in.size());
  for (size_t i = 0; i < shape_in.size(); ++i) {
    if (i < lead) {
      LATHE_CHECK(shape_in[i] >= 0, "expand: invalid size ", shape_in[i], " in ", shape_str(shape_in));
      s[i] = shape_in[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = shape_in[i] == -1 ? have : shape_in[i];
    LATHE_CHECK(have == want || have == 1, "expand: cannot expand ", desc(), " to ",
                shape_str(shape_in), " (dim ", i, ": ", have, " to ", want, ")");
    s[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  if (s == shape()) return *this;
  Tensor out = restride(*this, s, st, offset());
  Shape in_shape = shape();
  return record("expand", out, {*this}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || shape()[size_t(d)] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t x : shape())
    if (x != 1) s.push_back(x);
  return s.size() == shape().size() ? *this : reshape(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return reshape(s);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  if (numel() > 0) backend_for(device()).copy(*this, out);
  return record("clone", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

bool owns_its_memory(const Tensor& t) {
  const std::shared_ptr<TensorImpl>& impl = t.impl_ptr();
  return impl.use_count() == 1 && impl->storage.use_count() == 1 && impl->offset == 0 && t.is_contiguous() &&
         impl->storage->nbytes() == t.nbytes();
}

// ---------------------------------------------------------------- moves and casts

namespace {
// A contiguous copy of `src` on `dst_device`, same dtype, counted as a transfer.
Tensor transfer(const Tensor& src_in, Device dst_device) {
  Tensor src = src_in.contiguous();
  Tensor out = Tensor::empty(src.shape(), src.dtype(), dst_device);
  size_t n = src.nbytes();
  Device sd = src.device();
  if (n > 0) {
    if (sd.host_accessible() && dst_device.host_accessible()) {
      std::memcpy(out.data_ptr(), src.data_ptr(), n);
    } else if (sd.host_accessible()) {
      backend_for(dst_device).copy_from_host(out.data_ptr(), src.data_ptr(), n, dst_device.index);
    } else if (dst_device.host_accessible()) {
      backend_for(sd).copy_to_host(out.data_ptr(), src.data_ptr(), n, sd.index);
    } else {  // between two GPUs: stage through the host
      std::vector<char> staging(n);
      backend_for(sd).copy_to_host(staging.data(), src.data_ptr(), n, sd.index);
      backend_for(dst_device).copy_from_host(out.data_ptr(), staging.data(), n, dst_device.index);
    }
  }
  count_transfer(sd, dst_device, n);
  return out;
}
}  // namespace

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  backend_for(d);  // fails early, naming the device, when it does not exist
  Tensor out = transfer(detach(), d);
  Device src_device = device();
  return record("to_device", out, {*this}, [src_device](const Tensor& g) {
    return std::vector<Tensor>{g.to(src_device)};
  });
}

namespace {
std::atomic<uint64_t> g_casts{0};
}  // namespace

uint64_t cast_count() { return g_casts.load(std::memory_order_relaxed); }
void reset_cast_count() { g_casts.store(0, std::memory_order_relaxed); }

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor out = empty(shape(), t, device());
  if (numel() > 0) {
    backend_for(device()).copy(*this, out);
    g_casts.fetch_add(1, std::memory_order_relaxed);
  }
  if (!is_floating(t)) return out;  // integer results carry no gradient
  DType src_dtype = dtype();
  return record("to_dtype", out, {*this}, [src_dtype](const Tensor& g) {
    return std::vector<Tensor>{g.to(src_dtype)};
  });
}

// ---------------------------------------------------------------- host access

double Tensor::item() const {
  LATHE_CHECK(numel() == 1, "item: tensor ", desc(), " has ", numel(), " elements, not 1");
  Tensor h = device().is_cpu() ? *this : transfer(detach(), Device::cpu());
  if (!device().is_cpu()) count_sync();
  return LATHE_DISPATCH_ALL(h.dtype(), "item", [&]<class T>() -> double {
    return double(static_cast<typename compute_type<T>::type>(*static_cast<const T*>(h.data_ptr())));
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor h = device().is_cpu() ? *this : transfer(detach(), Device::cpu());
  if (!device().is_cpu()) count_sync();
  if (h.dtype() != dtype_of<T>() || !h.is_contiguous()) {
    Tensor c = empty(h.shape(), dtype_of<T>(), Device::cpu());
    if (h.numel() > 0) backend_for(Device::cpu()).copy(h, c);
    h = c;
  }
  const T* p = static_cast<const T*>(h.data_ptr());
  return std::vector<T>(p, p + h.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

namespace {
void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& s, size_t d, int64_t& pos,
               bool is_float, int indent) {
  if (s.empty()) {
    os << v[0];
    return;
  }
  os << '[';
  for (int64_t i = 0; i < s[d]; ++i) {
    if (i) {
      os << ',';
      if (d + 1 < s.size()) os << '\n' << std::string(size_t(indent + 1), ' ');
      else os << ' ';
    }
    if (d + 1 == s.size()) {
      if (is_float) os << std::setw(10) << v[size_t(pos)];
      else os << v[size_t(pos)];
      pos++;
    } else {
      print_rec(os, v, s, d + 1, pos, is_float, indent + 1);
    }
  }
  os << ']';
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> v = to_vector<double>();
  std::ostringstream os;
  os << "tensor(";
  bool f = is_floating(dtype());
  if (f) os << std::fixed << std::setprecision(4);
  int64_t pos = 0;
  if (numel() == 0) os << "[]";
  else print_rec(os, v, shape(), 0, pos, f, 7);
  os << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device=" << device();
  if (requires_grad()) os << ", requires_grad";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---------------------------------------------------------------- in place

Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.detach();
  if (s.device() != device()) s = transfer(s, device());
  s = s.expand(shape());
  if (numel() > 0) backend_for(device()).copy(s, *this);
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  if (numel() == 0) return *this;
  if (is_contiguous()) backend_for(device()).fill(*this, value);
  else copy_(Tensor::scalar(value, dtype(), device()));
  bump_version();
  return *this;
}

void Tensor::set_data(const Tensor& other) {
  TensorImpl& me = impl();
  const TensorImpl& o = *other.impl_ptr();
  me.storage = o.storage;
  me.shape = o.shape;
  me.strides = o.strides;
  me.offset = o.offset;
  me.dtype = o.dtype;
}

// ---------------------------------------------------------------- autograd

Tensor& Tensor::requires_grad_(bool on) {
  LATHE_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating tensors can require ",
              "gradients, got ", desc());
  LATHE_CHECK(is_leaf() || on, "requires_grad_: cannot turn off requires_grad of a non-leaf tensor");
  impl().requires_grad = on;
  return *this;
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    impl().grad.reset();
    return;
  }
  LATHE_CHECK(g.shape() == shape() && g.device() == device(), "set_grad: gradient ", g.desc(),
              " does not match tensor ", desc());
  impl().grad = g.impl_ptr();
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

Tensor Tensor::detach() const { return restride(*this, shape(), strides(), offset()); }

}  // namespace lathe
