// Element types. f32 is the working type; f64 is for gradchecks and Prodigy's scalars; bf16 and
// f16 are storage types for mixed precision (CPU kernels compute them in f32); i32/i64 hold token
// ids and indices; b8 holds masks and comparison results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include <Eigen/Core>  // Eigen::bfloat16 and Eigen::half: the 16-bit float types with conversions

namespace lathe {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, b8 };

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", ...
DType dtype_from_name(const std::string& name);  // throws on an unknown name
bool is_floating(DType t);
bool is_integral(DType t);  // i32, i64 (not b8)
std::ostream& operator<<(std::ostream& os, DType t);

// The C++ type of each dtype, and back.
template <DType T> struct dtype_traits;
template <> struct dtype_traits<DType::f32> { using type = float; };
template <> struct dtype_traits<DType::f64> { using type = double; };
template <> struct dtype_traits<DType::bf16> { using type = bf16; };
template <> struct dtype_traits<DType::f16> { using type = f16; };
template <> struct dtype_traits<DType::i32> { using type = int32_t; };
template <> struct dtype_traits<DType::i64> { using type = int64_t; };
template <> struct dtype_traits<DType::b8> { using type = bool; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }

// The type arithmetic happens in: 16-bit floats compute in f32.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<bf16> { using type = float; };
template <> struct compute_type<f16> { using type = float; };

// Promotion for binary ops: the wider float wins; any float beats any integer; b8 is lowest.
DType promote(DType a, DType b);

}  // namespace lathe

// Dispatch a dtype to a C++ type: LATHE_DISPATCH_ALL(t, "op", [&]<class T>() { ... });
// The lambda is a template over the element type, so each kernel is compiled once per dtype and
// the inner loop has no per-element dispatch.
#define LATHE_DISPATCH_CASE_(enumv, body) \
  case ::lathe::DType::enumv:             \
    return body.template operator()<typename ::lathe::dtype_traits<::lathe::DType::enumv>::type>();

#define LATHE_DISPATCH_FLOAT(t, opname, ...)                                              \
  [&]() {                                                                                  \
    auto&& body = __VA_ARGS__;                                                             \
    switch (t) {                                                                           \
      LATHE_DISPATCH_CASE_(f32, body)                                                      \
      LATHE_DISPATCH_CASE_(f64, body)                                                      \
      LATHE_DISPATCH_CASE_(bf16, body)                                                     \
      LATHE_DISPATCH_CASE_(f16, body)                                                      \
      default:                                                                             \
        LATHE_FAIL(opname, ": dtype ", ::lathe::dtype_name(t), " is not a floating type"); \
    }                                                                                      \
  }()

#define LATHE_DISPATCH_ALL(t, opname, ...)                               \
  [&]() {                                                                 \
    auto&& body = __VA_ARGS__;                                            \
    switch (t) {                                                          \
      LATHE_DISPATCH_CASE_(f32, body)                                     \
      LATHE_DISPATCH_CASE_(f64, body)                                     \
      LATHE_DISPATCH_CASE_(bf16, body)                                    \
      LATHE_DISPATCH_CASE_(f16, body)                                     \
      LATHE_DISPATCH_CASE_(i32, body)                                     \
      LATHE_DISPATCH_CASE_(i64, body)                                     \
      LATHE_DISPATCH_CASE_(b8, body)                                      \
    }                                                                     \
    LATHE_FAIL(opname, ": unknown dtype");                                \
  }()

#define LATHE_DISPATCH_INDEX(t, opname, ...)                                                \
  [&]() {                                                                                    \
    auto&& body = __VA_ARGS__;                                                               \
    switch (t) {                                                                             \
      LATHE_DISPATCH_CASE_(i32, body)                                                        \
      LATHE_DISPATCH_CASE_(i64, body)                                                        \
      default:                                                                               \
        LATHE_FAIL(opname, ": index dtype must be i32 or i64, got ", ::lathe::dtype_name(t)); \
    }                                                                                        \
  }()
