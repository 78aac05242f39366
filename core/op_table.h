// The elementwise ops of lathe, one entry each: its name, the dtypes it is defined for, and its
// scalar arithmetic, written once. Everything else about an elementwise op is generated from this
// table: the UnaryOp / BinaryOp enums, their names, the dtype checks of the op layer, and the
// dispatch of both backends (core/cpu/elementwise.cpp and cuda/elementwise.cu).
//
// The header depends on nothing but the standard library, because nvcc includes it too and must
// never parse Eigen or lathe's tensor headers.
//
// Each entry's `apply` is a template over the math library `M` (exp, log, log1p, sqrt, tanh, erf,
// pow) and the compute type `C` (f32 for 16-bit floats, else the element type). The backends pass
// their own math: the CPU a vectorisable tanh (core/cpu/cpu_math.h), CUDA the device library
// (cuda/device_common.cuh). A 16-bit element is widened to f32, computed, and rounded once.
//
// Adding an elementwise op takes five places: an entry here (the struct and its line in the list
// at the bottom), its declaration in core/ops.h and its public function with the backward rule
// beside it in core/ops/, its entry in the op registry (ref/op_registry.cpp), and its line in the
// PyTorch table (tests/golden/make_op_goldens.py). tests/test_op_cases.cpp fails on an entry of
// these lists that no registry entry covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define LATHE_SCALAR __host__ __device__ __forceinline__
#else
#define LATHE_SCALAR inline __attribute__((always_inline))
#endif

namespace lathe {

// The dtypes an op is defined for.
enum class OpDTypes : uint8_t {
  all,       // every dtype, bool included
  numeric,   // every dtype but bool
  floating,  // f32, f64, bf16, f16
};

// The scalar operands of a parametrised unary op (pow's exponent, clamp's bounds, softcap's cap) in
// the compute type. An absent clamp bound has has_p0 / has_p1 false.
template <class C>
struct OpScalars {
  C p0{}, p1{};
  bool has_p0 = true, has_p1 = true;
};

// The host's scalars as a kernel takes them; a NaN means "absent" (a clamp bound left out).
template <class C>
constexpr OpScalars<C> op_scalars(double p0, double p1) {
  OpScalars<C> s;
  s.has_p0 = !(p0 != p0);
  s.has_p1 = !(p1 != p1);
  s.p0 = s.has_p0 ? static_cast<C>(p0) : C(0);
  s.p1 = s.has_p1 ? static_cast<C>(p1) : C(0);
  return s;
}

namespace op_table {

// ---------------------------------------------------------------- unary: y = f(x)

struct neg {
  static constexpr const char* name = "neg";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return C(-x); }
};

struct exp {
  static constexpr const char* name = "exp";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return M::exp(x); }
};

struct log {
  static constexpr const char* name = "log";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return M::log(x); }
};

struct sqrt {
  static constexpr const char* name = "sqrt";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return M::sqrt(x); }
};

struct rsqrt {
  static constexpr const char* name = "rsqrt";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return C(1) / M::sqrt(x); }
};

struct tanh {
  static constexpr const char* name = "tanh";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return M::tanh(x); }
};

// GPT-2's GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Computed as x sigmoid(2u) = x / (1 + exp(-2u)), the same function: one exp and one division
// where tanh costs an exp, a division and a polynomial (GELU both ways was 5% of a CPU training
// step), and no cancellation in 1 + tanh(u) for negative x.
struct gelu {
  static constexpr const char* name = "gelu";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    const C two_k = C(1.5957691216057308);  // 2 sqrt(2 / pi)
    const C c = C(0.044715);
    return x / (C(1) + M::exp(-two_k * (x + c * x * x * x)));
  }
};

// GELU without the approximation (PyTorch's approximate="none"): x Phi(x), Phi the normal CDF.
struct gelu_erf {
  static constexpr const char* name = "gelu_erf";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    return C(0.5) * x * (C(1) + M::erf(x * C(0.7071067811865476)));  // 1 / sqrt(2)
  }
};

struct sigmoid {
  static constexpr const char* name = "sigmoid";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    return C(1) / (C(1) + M::exp(-x));
  }
};

// log(sigmoid(x)), as PyTorch computes it: min(x, 0) - log1p(exp(-|x|)), which neither overflows
// for a large |x| nor loses exp(-|x|) below the unit roundoff (as log(1 + exp(-|x|)) would). The
// log-likelihood of a logistic model: DPO's loss is -log_sigmoid of a margin.
struct log_sigmoid {
  static constexpr const char* name = "log_sigmoid";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    return (x < C(0) ? x : C(0)) - M::log1p(M::exp(x < C(0) ? x : -x));
  }
};

// SiLU (swish): x * sigmoid(x), written as PyTorch computes it.
struct silu {
  static constexpr const char* name = "silu";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    return x / (C(1) + M::exp(-x));
  }
};

struct relu {
  static constexpr const char* name = "relu";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return x > C(0) ? x : C(0); }
};

struct abs {
  static constexpr const char* name = "abs";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return x < C(0) ? C(-x) : x; }
};

struct square {
  static constexpr const char* name = "square";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return C(x * x); }
};

struct sign {
  static constexpr const char* name = "sign";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) {
    return C((C(0) < x) - (x < C(0)));
  }
};

// x ** p0 (a scalar exponent; the tensor exponent is the binary pow).
struct pow_scalar {
  static constexpr const char* name = "pow";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>& s) { return M::pow(x, s.p0); }
};

// min(max(x, p0), p1); either bound may be absent.
struct clamp {
  static constexpr const char* name = "clamp";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>& s) {
    if (s.has_p0 && x < s.p0) x = s.p0;
    if (s.has_p1 && x > s.p1) x = s.p1;
    return x;
  }
};

// ReLU squared, relu(x)^2 (the Primer paper's activation, modded-nanogpt's and nanochat's MLP): one
// pass where relu then square would be two, and one saved tensor instead of two.
struct squared_relu {
  static constexpr const char* name = "squared_relu";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>&) { return x > C(0) ? x * x : C(0); }
};

// Logit soft-capping, p0 tanh(x / p0) (Gemma 2, modded-nanogpt): smooth, odd, and bounded by the cap p0.
struct softcap {
  static constexpr const char* name = "softcap";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  template <class M, class C> LATHE_SCALAR static C apply(C x, const OpScalars<C>& s) {
    return s.p0 * M::tanh(x / s.p0);
  }
};

// ---------------------------------------------------------------- binary: z = f(x, y)
// Operands are broadcast to the output's shape before the kernel runs. `predicate` ops write bool.

struct add {
  static constexpr const char* name = "add";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return C(x + y); }
};

struct sub {
  static constexpr const char* name = "sub";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return C(x - y); }
};

struct mul {
  static constexpr const char* name = "mul";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return C(x * y); }
};

// Integer division truncates; the op layer refuses a zero divisor before any kernel runs (a
// kernel cannot throw), and the 0 here only keeps a stray one from trapping.
struct div {
  static constexpr const char* name = "div";
  static constexpr OpDTypes dtypes = OpDTypes::numeric;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) {
    if constexpr (std::is_integral_v<C>) return y == 0 ? C(0) : C(x / y);
    else return x / y;
  }
};

struct pow {
  static constexpr const char* name = "pow";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return M::pow(x, y); }
};

// NaN wins, as torch.maximum and torch.minimum.
struct maximum {
  static constexpr const char* name = "maximum";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return (x != x || x > y) ? x : y; }
};

struct minimum {
  static constexpr const char* name = "minimum";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C y) { return (x != x || x < y) ? x : y; }
};

#define LATHE_COMPARISON_(op_name, expr)                                      \
  struct op_name {                                                            \
    static constexpr const char* name = #op_name;                             \
    static constexpr OpDTypes dtypes = OpDTypes::all;                         \
    static constexpr bool predicate = true;                                   \
    template <class M, class C> LATHE_SCALAR static bool apply(C x, C y) { return expr; } \
  };
LATHE_COMPARISON_(eq, x == y)
LATHE_COMPARISON_(ne, x != y)
LATHE_COMPARISON_(lt, x < y)
LATHE_COMPARISON_(le, x <= y)
LATHE_COMPARISON_(gt, x > y)
LATHE_COMPARISON_(ge, x >= y)
#undef LATHE_COMPARISON_

// Backward rules that run as one elementwise pass: x is the forward input (or its output, as
// named), g the incoming gradient.
// With s = sigmoid(2u) (so tanh(u) = 2s - 1 and 1 - tanh(u)^2 = 4s(1 - s)):
// d/dx x s = s + 2 x s (1 - s) du/dx.
struct gelu_backward {  // x = the input
  static constexpr const char* name = "gelu_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) {
    const C two_k = C(1.5957691216057308);  // 2 sqrt(2 / pi)
    const C c = C(0.044715);
    const C s = C(1) / (C(1) + M::exp(-two_k * (x + c * x * x * x)));
    const C du = two_k * (C(1) + C(3) * c * x * x);  // d(2u)/dx
    return g * (s + x * s * (C(1) - s) * du);
  }
};

// d/dx x Phi(x) = Phi(x) + x phi(x), phi the normal density; x = the input.
struct gelu_erf_backward {
  static constexpr const char* name = "gelu_erf_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) {
    const C cdf = C(0.5) * (C(1) + M::erf(x * C(0.7071067811865476)));
    const C pdf = C(0.3989422804014327) * M::exp(C(-0.5) * x * x);  // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};

struct tanh_backward {  // y = tanh(x)
  static constexpr const char* name = "tanh_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C y, C g) { return g * (C(1) - y * y); }
};

struct sigmoid_backward {  // y = sigmoid(x)
  static constexpr const char* name = "sigmoid_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C y, C g) { return g * y * (C(1) - y); }
};

// d/dx x sigmoid(x) = s (1 + x (1 - s)) with s = sigmoid(x); x = the input.
struct silu_backward {
  static constexpr const char* name = "silu_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) {
    const C s = C(1) / (C(1) + M::exp(-x));
    return g * (s * (C(1) + x * (C(1) - s)));
  }
};

struct relu_backward {  // x = the input
  static constexpr const char* name = "relu_backward";
  static constexpr OpDTypes dtypes = OpDTypes::all;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) { return x > C(0) ? g : C(0); }
};

// d/dx log(sigmoid(x)) = sigmoid(-x), from z = exp(-|x|) as PyTorch's backward computes it:
// 1 - z / (1 + z) below zero, z / (1 + z) above; x = the input.
struct log_sigmoid_backward {
  static constexpr const char* name = "log_sigmoid_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) {
    const C z = M::exp(x < C(0) ? x : -x);
    return x < C(0) ? g * (C(1) - z / (C(1) + z)) : g * (z / (C(1) + z));
  }
};

// d/dx relu(x)^2 = 2 relu(x); x = the input.
struct squared_relu_backward {
  static constexpr const char* name = "squared_relu_backward";
  static constexpr OpDTypes dtypes = OpDTypes::floating;
  static constexpr bool predicate = false;
  template <class M, class C> LATHE_SCALAR static C apply(C x, C g) { return x > C(0) ? C(2) * x * g : C(0); }
};

// ---------------------------------------------------------------- the lists
// X(entry) for every op; the enums below and both backends' dispatch expand them.

#define LATHE_UNARY_OPS(X)                                                                   \
  X(neg) X(exp) X(log) X(sqrt) X(rsqrt) X(tanh) X(gelu) X(gelu_erf) X(sigmoid) X(log_sigmoid) X(silu) X(relu) \
  X(abs) X(square) X(sign) X(pow_scalar) X(clamp) X(squared_relu) X(softcap)

#define LATHE_BINARY_OPS(X)                                                                      \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge) \
  X(gelu_backward) X(gelu_erf_backward) X(tanh_backward) X(sigmoid_backward) X(log_sigmoid_backward) \
  X(silu_backward) X(relu_backward) X(squared_relu_backward)

// Whether entry Op has a kernel for compute type C (bool is its own compute type).
template <class Op, class C>
constexpr bool defined_for() {
  if constexpr (Op::dtypes == OpDTypes::floating) return std::is_floating_point_v<C>;
  else if constexpr (Op::dtypes == OpDTypes::numeric) return !std::is_same_v<C, bool>;
  else return true;
}

}  // namespace op_table

#define LATHE_OP_ENUMERATOR_(entry) entry,
enum class UnaryOp : uint8_t { LATHE_UNARY_OPS(LATHE_OP_ENUMERATOR_) };
enum class BinaryOp : uint8_t { LATHE_BINARY_OPS(LATHE_OP_ENUMERATOR_) };
#undef LATHE_OP_ENUMERATOR_

// Reductions (kernels in core/cpu/reduce.cpp and cuda/reduce.cu); argmax/argmin write i64.
enum class ReduceOp : uint8_t { sum, max, min, argmax, argmin };

// Facts generated from the table, for the op layer and the backends' host code. An enum value is
// its entry's position in the list, so it indexes these arrays.
struct OpFacts {
  const char* name;
  OpDTypes dtypes;
  bool predicate;  // writes bool (comparisons) rather than its operands' dtype
};
#define LATHE_UNARY_FACTS_(entry) OpFacts{op_table::entry::name, op_table::entry::dtypes, false},
#define LATHE_BINARY_FACTS_(entry) OpFacts{op_table::entry::name, op_table::entry::dtypes, op_table::entry::predicate},
inline constexpr OpFacts kUnaryOpFacts[] = {LATHE_UNARY_OPS(LATHE_UNARY_FACTS_)};
inline constexpr OpFacts kBinaryOpFacts[] = {LATHE_BINARY_OPS(LATHE_BINARY_FACTS_)};
#undef LATHE_UNARY_FACTS_
#undef LATHE_BINARY_FACTS_

constexpr const OpFacts& op_facts(UnaryOp op) { return kUnaryOpFacts[static_cast<size_t>(op)]; }
constexpr const OpFacts& op_facts(BinaryOp op) { return kBinaryOpFacts[static_cast<size_t>(op)]; }
constexpr const char* op_name(UnaryOp op) { return op_facts(op).name; }
constexpr const char* op_name(BinaryOp op) { return op_facts(op).name; }
constexpr OpDTypes op_dtypes(UnaryOp op) { return op_facts(op).dtypes; }
constexpr OpDTypes op_dtypes(BinaryOp op) { return op_facts(op).dtypes; }
constexpr bool is_predicate(BinaryOp op) { return op_facts(op).predicate; }

}  // namespace lathe
