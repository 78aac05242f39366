// Helpers shared by the core test suites: golden tensors from core_golden.h, and closeness
// checks whose failure message names the element and both values.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"
#include "golden/core_golden.h"

namespace core_test {

using lathe::DType;
using lathe::Tensor;

// A tensor of the given lathe dtype holding `values` (exactly representable in it).
inline Tensor tensor_of(const std::vector<double>& values, const lathe::Shape& shape, DType t) {
  switch (t) {
    case DType::f64: return Tensor::from_vector(values, shape);
    case DType::i64:
    case DType::i32: {
      std::vector<int64_t> v(values.begin(), values.end());
      return Tensor::from_vector(v, shape).to(t);
    }
    case DType::b8: {
      std::vector<uint8_t> v;
      for (double x : values) v.push_back(x != 0 ? 1 : 0);
      return Tensor::from_bytes(v.data(), shape, DType::b8);
    }
    default: {
      std::vector<float> v(values.begin(), values.end());
      return Tensor::from_vector(v, shape).to(t);
    }
  }
}

inline const core_golden::GoldenTensor* find_golden(const std::string& name) {
  for (const auto& g : core_golden::tensors())
    if (name == g.name) return &g;
  return nullptr;
}

// The golden tensor `name` ("<case>.<tensor>") in its own dtype; throws when missing.
inline Tensor golden(const std::string& name) {
  const auto* g = find_golden(name);
  LATHE_CHECK(g != nullptr, "no golden tensor named ", name);
  return tensor_of(g->values, g->shape, lathe::dtype_from_name(g->dtype));
}

// The input names of a case, in the generator's order: every "<case>.<x>" that is not the
// output, the output weights or a gradient.
inline std::vector<std::string> golden_inputs(const std::string& c) {
  std::vector<std::string> names;
  const std::string prefix = c + ".";
  for (const auto& g : core_golden::tensors()) {
    std::string n = g.name;
    if (n.rfind(prefix, 0) != 0) continue;
    std::string leaf = n.substr(prefix.size());
    if (leaf == "out" || leaf == "gout" || leaf.rfind("grad_", 0) == 0) continue;
    names.push_back(leaf);
  }
  return names;
}

// "" when actual and expected have the same shape and every element satisfies
// |a - e| <= atol + rtol |e| (NaNs must match NaNs, infinities must be equal); else a message
// naming the first element that does not.
inline std::string compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.shape() != expected.shape())
    return "shape " + lathe::shape_str(actual.shape()) + " != expected " + lathe::shape_str(expected.shape());
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok = std::isnan(e[i]) ? std::isnan(a[i])
              : std::isinf(e[i]) ? a[i] == e[i]
                                 : std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]);
    if (!ok)
      return lathe::detail::cat("element ", i, ": got ", a[i], ", expected ", e[i], " (diff ",
                                std::abs(a[i] - e[i]), ")");
  }
  return "";
}

// Bitwise equality of two tensors' bytes (same dtype and shape).
inline bool same_bits(const Tensor& x, const Tensor& y) {
  if (x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
  Tensor a = x.to(lathe::Device::cpu()).contiguous(), b = y.to(lathe::Device::cpu()).contiguous();
  return a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// Vectors for from_vector in tests.
inline Tensor f32(const std::vector<float>& v, const lathe::Shape& s) { return Tensor::from_vector(v, s); }
inline Tensor f64(const std::vector<double>& v, const lathe::Shape& s) { return Tensor::from_vector(v, s); }
inline Tensor i64(const std::vector<int64_t>& v, const lathe::Shape& s) { return Tensor::from_vector(v, s); }

}  // namespace core_test
