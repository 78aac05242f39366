// Helpers shared by the test suites: golden tensors (tests/golden/*.safetensors), and the one
// closeness check, whose failure message names the element and both values.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "core/ops.h"
#include "serialize/safetensors.h"

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

// The golden files, in the one golden format (safetensors, written by the generator scripts in
// tests/golden/ through golden_safetensors.py), read once: the dtype cases, casts, roundings and
// promotions of make_core_goldens.py.
inline const std::vector<lathe::serialize::SafetensorsFile>& golden_files() {
  static const std::vector<lathe::serialize::SafetensorsFile> files = {
      lathe::serialize::read_safetensors(LATHE_GOLDEN_DIR "/core_ops.safetensors"),
  };
  return files;
}

inline const Tensor* find_golden(const std::string& name) {
  for (const auto& f : golden_files())
    if (const Tensor* t = f.find(name)) return t;
  return nullptr;
}

// The golden tensor `name` ("<case>.<tensor>") in its own dtype, a fresh copy (tests mark inputs
// as requiring gradients); throws when missing.
inline Tensor golden(const std::string& name) {
  const Tensor* t = find_golden(name);
  LATHE_CHECK(t != nullptr, "no golden tensor named ", name);
  return t->clone();
}

// The input names of a case, in the generator's order: every "<case>.<x>" but the output.
inline std::vector<std::string> golden_inputs(const std::string& c) {
  std::vector<std::string> names;
  const std::string prefix = c + ".";
  for (const auto& f : golden_files())
    for (const auto& [n, t] : f.tensors) {
      if (n.rfind(prefix, 0) != 0) continue;
      std::string leaf = n.substr(prefix.size());
      if (leaf == "out") continue;
      names.push_back(leaf);
    }
  return names;
}

// A conversion of `src` (dtype `from`) to dtype `to` as torch computes it: kind "cast" (every pair
// of the 7 dtypes) or "round" (f32 and f64 to bf16 and f16, ties and overflow).
struct GoldenCast {
  std::string from, to;
  Tensor src, dst;
};
inline std::vector<GoldenCast> golden_casts(const std::string& kind) {
  std::vector<GoldenCast> out;
  for (const auto& [n, t] : golden_files()[0].tensors) {
    if (n.rfind(kind + ".", 0) != 0 || n.size() < 4 || n.substr(n.size() - 4) != ".src") continue;
    const std::string pair = n.substr(kind.size() + 1, n.size() - kind.size() - 5);  // "<from>.<to>"
    const size_t dot = pair.find('.');
    out.push_back({pair.substr(0, dot), pair.substr(dot + 1), t, golden(kind + "." + pair + ".dst")});
  }
  return out;
}

// torch.result_type for every pair of dtypes: {a, b, result}.
inline std::vector<std::array<std::string, 3>> golden_promotions() {
  const auto doc = nlohmann::json::parse(golden_files()[0].metadata.at("promotions"));
  return doc.get<std::vector<std::array<std::string, 3>>>();
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
