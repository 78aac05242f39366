// Tensor: a view (shape, strides, offset, dtype) over reference-counted storage on one device,
// plus the autograd fields (requires_grad, grad, the node that produced it).
//
// Copying a Tensor copies a handle: both refer to the same TensorImpl. Parameters keep their
// identity through `set_data` (Module::to moves a parameter in place), so an optimizer holding a
// parameter always sees where it lives now.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace lathe {

struct Node;  // autograd.h

struct TensorImpl {
  StoragePtr storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;   // accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;      // the op that produced this tensor (null for leaves)
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (dtype f32 and device cpu unless given) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor arange(int64_t start, int64_t end, int64_t step = 1, DType dtype = DType::i64,
                       Device device = Device::cpu());
  // Copies `values` (whose C++ type gives the dtype) into a new tensor of `shape`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu());
  static Tensor from_bytes(const void* data, const Shape& shape, DType dtype,
                           Device device = Device::cpu());
  // Random tensors from the counter-based generator: (seed, offset) is the whole state, so the
  // same seed gives the same numbers on every device. See core/random.h for a stateful Generator.
  static Tensor rand(const Shape& shape, uint64_t seed, uint64_t offset = 0, DType dtype = DType::f32,
                     Device device = Device::cpu());  // uniform [0, 1)
  static Tensor randn(const Shape& shape, uint64_t seed, uint64_t offset = 0, DType dtype = DType::f32,
                      Device device = Device::cpu());  // standard normal
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, uint64_t seed, uint64_t offset = 0,
                        DType dtype = DType::i64, Device device = Device::cpu());

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return numel_of(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  const StoragePtr& storage() const { return impl().storage; }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }
  // A description for error messages: "f32[2, 3] on cpu".
  std::string desc() const;

  // Raw pointer to the first element (storage base + offset). For kernels.
  void* data_ptr() const;
  // Typed pointer; checks the dtype and that the memory is host-accessible.
  template <class T>
  T* data() const;

  // ---- views: share storage; each is an autograd op ----
  Tensor view(const Shape& shape) const;      // needs compatible strides; -1 infers one dim
  Tensor reshape(const Shape& shape) const;   // a view when possible, else a copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow to one and drop the dim
  Tensor expand(const Shape& shape) const;           // -1 keeps a dim
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;  // drops every dim of size 1
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;  // self when already contiguous

  // ---- moves and casts (autograd ops; self when nothing changes) ----
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor clone() const;  // a contiguous copy with its own storage

  // ---- host access ----
  double item() const;  // one-element tensors; a device tensor costs a counted copy and sync
  template <class T>
  T item() const { return static_cast<T>(item()); }
  template <class T>
  std::vector<T> to_vector() const;  // copies to host, casts to T
  std::string str() const;           // printing, PyTorch-like

  // ---- in place, outside autograd ----
  Tensor& copy_(const Tensor& src);   // src broadcast to self's shape, any device, any dtype
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  // Replaces the storage, shape and device while keeping this tensor's identity (and its
  // requires_grad). Module::to uses it so that an optimizer's references stay valid.
  void set_data(const Tensor& other);
  // The version of this tensor's memory (Storage::version), shared with its views: copy_, fill_
  // and every other in-place write through lathe's API bump it; code that writes through
  // data_ptr() calls bump_version() itself.
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }
  void set_grad(const Tensor& g);  // undefined Tensor clears it
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  // Backpropagates from this tensor; `grad` defaults to ones for a one-element tensor.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no history

  // Identity of the underlying TensorImpl (a parameter's identity).
  TensorImpl* id() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  TensorImpl& impl() const {
    LATHE_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Casts between dtypes that ran a kernel (Tensor::to(DType) to another dtype, autograd's casts of
// gradients among them). Counted in every build: on a GPU each is one launch and one pass over
// memory, so a 16-bit step's count is part of its cost (`lathe bench` prints it per step).
uint64_t cast_count();
void reset_cast_count();

// True when t is the only handle on its memory and covers all of it, contiguously: nothing else can
// read or write that memory, so an op may reuse it (autograd makes such a gradient a leaf's .grad
// as it is; the fused classifier writes the gradient over logits handed to it).
bool owns_its_memory(const Tensor& t);

// Makes a tensor with fresh storage on `device`.
Tensor make_tensor(const Shape& shape, const Strides& strides, int64_t offset, DType dtype, StoragePtr storage);

// ---- templates ----
template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  LATHE_CHECK(int64_t(values.size()) == numel_of(shape), "from_vector: ", values.size(),
              " values do not fill shape ", shape_str(shape));
  return from_bytes(values.data(), shape, dtype_of<T>(), device);
}

template <class T>
T* Tensor::data() const {
  LATHE_CHECK(dtype() == dtype_of<T>(), "data<", dtype_name(dtype_of<T>()), ">: tensor is ", desc());
  LATHE_CHECK(device().host_accessible(), "data(): tensor ", desc(),
              " is not in host memory; copy it with .to(Device::cpu()) first");
  return static_cast<T*>(data_ptr());
}

}  // namespace lathe
