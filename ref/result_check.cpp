#include "ref/result_check.h"

#include <array>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/tensor.h"

namespace lathe::ref {

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return {1.3e-6, 1e-5};
    case DType::f64: return {1e-7, 1e-7};
    case DType::bf16: return {1.6e-2, 1e-5};
    case DType::f16: return {1e-3, 1e-5};
    default: return {0, 0};
  }
}

namespace {

// How an element differs when one of its values is not finite; none when both are finite (or
// equal). The order is the report's.
enum class NonFinite { nan_got, nan_want, nan_both, inf_got, inf_want, inf_opposite, none };
constexpr size_t kNonFiniteKinds = size_t(NonFinite::none);

const char* non_finite_how(NonFinite k) {
  switch (k) {
    case NonFinite::nan_got: return "NaN in got only";
    case NonFinite::nan_want: return "NaN in want only";
    case NonFinite::nan_both: return "NaN in both (equal only with --equal-nan)";
    case NonFinite::inf_got: return "infinite in got only";
    case NonFinite::inf_want: return "infinite in want only";
    case NonFinite::inf_opposite: return "infinities of opposite signs";
    case NonFinite::none: break;
  }
  return "";
}

// One element under torch.isclose's arithmetic: the difference and the allowance are computed in
// T's compute type and rounded to T, as PyTorch's kernels do for a tensor of dtype T.
struct ElementCheck {
  bool pass;
  double ratio;  // |diff| / allowance (infinite when no allowance can cover it); finite values only
  double diff;   // |got - want| as rounded to T; finite values only
  NonFinite kind = NonFinite::none;
};

template <class T>
ElementCheck check_element(T got, T want, const Tolerance& tol, bool equal_nan) {
  const double inf = std::numeric_limits<double>::infinity();
  if constexpr (std::is_same_v<T, bool>) {
    return {got == want, got == want ? 0.0 : inf, got == want ? 0.0 : 1.0};
  } else if constexpr (std::is_integral_v<T>) {
    // assert_close compares integers exactly unless given tolerances; they apply as to floats.
    const double g = double(got), w = double(want), diff = std::abs(g - w);
    const double allowed = tol.atol + tol.rtol * std::abs(w);
    return {diff <= allowed, diff == 0 ? 0.0 : allowed > 0 ? diff / allowed : inf, diff};
  } else {
    using C = typename compute_type<T>::type;
    const C g = C(got), w = C(want);
    if (std::isnan(g) || std::isnan(w)) {
      const bool both = std::isnan(g) && std::isnan(w);
      return {both && equal_nan, 0.0, 0.0,
              both ? NonFinite::nan_both : std::isnan(g) ? NonFinite::nan_got : NonFinite::nan_want};
    }
    if (g == w) return {true, 0.0, 0.0};  // infinities of one sign too
    if (std::isinf(g) || std::isinf(w))
      return {false, 0.0, 0.0,
              std::isinf(g) && std::isinf(w) ? NonFinite::inf_opposite
              : std::isinf(g)                ? NonFinite::inf_got
                                             : NonFinite::inf_want};
    // Finite values whose difference overflows T are infinitely far apart, and fail.
    const C diff = C(T(std::abs(C(T(g - w)))));
    const C allowed = C(T(C(tol.atol) + std::abs(C(T(C(tol.rtol) * w)))));
    const bool pass = std::isfinite(diff) && diff <= allowed;
    const double ratio = !std::isfinite(diff) ? inf : allowed > 0 ? double(diff) / double(allowed) : inf;
    return {pass, ratio, double(diff)};
  }
}

TensorVerdict compare_tensor(const std::string& name, const Tensor& got_in, const Tensor& want_in,
                             const CheckOptions& options) {
  TensorVerdict v;
  v.name = name;
  v.shape = want_in.shape();
  v.dtype = want_in.dtype();
  v.tolerance = options.tolerance.value_or(default_tolerance(want_in.dtype()));
  if (got_in.shape() != want_in.shape()) {
    v.problem = "shape " + shape_str(got_in.shape()) + " but want " + shape_str(want_in.shape());
    return v;
  }
  if (got_in.dtype() != want_in.dtype()) {
    v.problem = std::string("dtype ") + dtype_name(got_in.dtype()) + " but want " + dtype_name(want_in.dtype());
    return v;
  }
  const Tensor got = got_in.contiguous(), want = want_in.contiguous();
  v.elements = want.numel();
  v.worst_ratio = 0;
  std::array<NonFiniteMismatch, kNonFiniteKinds> by_kind;
  LATHE_DISPATCH_ALL(want.dtype(), "ref --check", [&]<class T>() {
    const T* g = got.data<T>();
    const T* w = want.data<T>();
    for (int64_t i = 0; i < v.elements; ++i) {
      const ElementCheck e = check_element<T>(g[i], w[i], v.tolerance, options.equal_nan);
      if (!e.pass) ++v.mismatched;
      if (e.kind != NonFinite::none) {
        NonFiniteMismatch& m = by_kind[size_t(e.kind)];
        if (!e.pass && m.count++ == 0) {
          m.first_index = i;
          m.got = double(g[i]);
          m.want = double(w[i]);
        }
        continue;
      }
      v.max_abs_diff = std::max(v.max_abs_diff, e.diff);
      if (v.worst_index < 0 || e.ratio > v.worst_ratio) {
        v.worst_ratio = e.ratio;
        v.worst_index = i;
        v.worst_got = double(g[i]);
        v.worst_want = double(w[i]);
      }
    }
  });
  for (size_t k = 0; k < kNonFiniteKinds; ++k) {
    if (by_kind[k].count == 0) continue;
    by_kind[k].how = non_finite_how(NonFinite(k));
    v.non_finite.push_back(by_kind[k]);
  }
  v.pass = v.mismatched == 0;
  return v;
}

// "[1, 2]": the position of flat index i in `shape`.
std::string position(int64_t i, const Shape& shape) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  std::string out = "[";
  for (size_t d = 0; d < at.size(); ++d) out += (d ? ", " : "") + std::to_string(at[d]);
  return out + "]";
}

std::string number(double x) {
  if (std::isnan(x)) return "nan";  // whatever its sign bit
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

// The verdict on a tensor only one file holds: a failure, with no elements compared.
TensorVerdict unmatched(const std::string& name, const Tensor& t, std::string problem) {
  TensorVerdict v;
  v.name = name;
  v.shape = t.shape();
  v.dtype = t.dtype();
  v.problem = std::move(problem);
  return v;
}

}  // namespace

std::vector<TensorVerdict> check_results(const serialize::SafetensorsFile& got, const serialize::SafetensorsFile& want,
                                         const CheckOptions& options) {
  std::vector<TensorVerdict> out;
  for (const auto& [name, w] : want.tensors) {
    const Tensor* g = got.find(name);
    out.push_back(g ? compare_tensor(name, *g, w, options) : unmatched(name, w, "missing from " + got.path));
  }
  for (const auto& [name, g] : got.tensors)
    if (!want.find(name)) out.push_back(unmatched(name, g, "not in " + want.path));
  return out;
}

std::string format_verdict(const TensorVerdict& v) {
  std::ostringstream os;
  os << (v.pass ? "PASS " : "FAIL ") << v.name << " " << shape_str(v.shape) << " " << dtype_name(v.dtype);
  if (!v.problem.empty()) {
    os << ": " << v.problem;
    return os.str();
  }
  os << " (rtol " << v.tolerance.rtol << ", atol " << v.tolerance.atol << "): ";
  if (v.elements == 0) {
    os << "no elements";
    return os.str();
  }
  if (!v.pass) os << v.mismatched << " of " << v.elements << " elements differ; ";
  for (const NonFiniteMismatch& m : v.non_finite)
    os << m.how << ": " << m.count << (m.count == 1 ? " element, at " : " elements, the first at ")
       << position(m.first_index, v.shape) << " (got " << number(m.got) << ", want " << number(m.want) << "); ";
  if (v.worst_index < 0) {
    os << "no element with two finite values";
    return os.str();
  }
  if (!v.non_finite.empty()) os << "over the finite elements: ";
  os << "max |got - want| " << number(v.max_abs_diff) << "; worst at " << position(v.worst_index, v.shape) << ": got "
     << number(v.worst_got) << ", want " << number(v.worst_want) << ", " << number(v.worst_ratio)
     << " of its tolerance";
  return os.str();
}

CheckReport check_report(std::vector<TensorVerdict> verdicts) {
  CheckReport r;
  const TensorVerdict* worst = nullptr;
  auto badness = [](const TensorVerdict& t) {
    return t.problem.empty() && t.non_finite.empty() ? t.worst_ratio : std::numeric_limits<double>::infinity();
  };
  for (const TensorVerdict& v : verdicts) {
    r.text += format_verdict(v) + "\n";
    r.passed += v.pass;
    if (!worst || badness(v) > badness(*worst)) worst = &v;
  }
  if (worst) r.text += "worst: " + format_verdict(*worst) + "\n";
  r.text += std::to_string(r.passed) + " of " + std::to_string(verdicts.size()) + " tensors pass\n";
  r.pass = !verdicts.empty() && r.passed == verdicts.size();
  r.verdicts = std::move(verdicts);
  return r;
}

}  // namespace lathe::ref
