// `lathe ref --check GOT WANT`: two result files compared tensor by tensor, with the verdicts of
// PyTorch's torch.testing.assert_close.
//
// An element passes when got == want (infinities of one sign included) or when
// |got - want| <= atol + rtol * |want| holds in the tensor's own dtype: like torch.isclose, a
// 16-bit tensor computes the difference and the allowance in f32 and rounds each to its dtype, so
// that a pair "failing by a hair" fails here exactly when it fails in PyTorch. NaN passes only
// against NaN and only with equal_nan. The tolerances default by dtype to assert_close's: f32
// 1.3e-6 / 1e-5, f64 1e-7 / 1e-7, bf16 1.6e-2 / 1e-5, f16 1e-3 / 1e-5, integers and booleans
// exact. A tensor passes when it has want's shape and dtype and all its elements pass; the files
// pass when they hold the same tensor names and every tensor passes. Elements that differ by a NaN
// or an infinity are reported by how they differ, as torch.testing reports them: NaN in one file and
// not the other, NaN in both (equal only with equal_nan), an infinity against a finite value or
// against the other infinity; the differences and the worst element are over the finite ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// assert_close's defaults for a dtype.
Tolerance default_tolerance(DType dtype);

struct CheckOptions {
  std::optional<Tolerance> tolerance;  // for every tensor; the dtype's default when absent
  bool equal_nan = false;
};

// Elements of one tensor that differ by a NaN or an infinity in the same way.
struct NonFiniteMismatch {
  std::string how;           // "NaN in got only", "NaN in both", "infinite in want only", ...
  int64_t count = 0;
  int64_t first_index = -1;  // flat index of the first such element
  double got = 0, want = 0;  // its values
};

struct TensorVerdict {
  std::string name;
  Shape shape;          // want's (got's for a tensor only got has)
  DType dtype = DType::f32;
  bool pass = false;
  std::string problem;    // for a failure without elements to compare: missing, shape, dtype
  Tolerance tolerance;    // the tolerance applied
  int64_t elements = 0;
  int64_t mismatched = 0;
  // Mismatches by a NaN or an infinity, by kind, in a fixed order (NaN first); empty when none.
  std::vector<NonFiniteMismatch> non_finite;
  // Over the elements where both values are finite: the one farthest outside (or nearest to the
  // edge of) its allowance, |got - want| divided by atol + rtol |want|. worst_index is -1 when no
  // element has two finite values.
  double worst_ratio = 0;
  int64_t worst_index = -1;  // flat index of that element
  double worst_got = 0, worst_want = 0;
  double max_abs_diff = 0;
};

// Every tensor of `want` in its file order, then the tensors only `got` has (failing). `got` and
// `want` name their files in messages.
std::vector<TensorVerdict> check_results(const serialize::SafetensorsFile& got, const serialize::SafetensorsFile& want,
                                         const CheckOptions& options);

// A verdict as one line for the terminal ("PASS output [2, 3] f32 ...").
std::string format_verdict(const TensorVerdict& v);

// What `lathe ref --check` prints and decides, for the command and for lathe.ref.check (python/):
// each verdict's line, then the worst (a tensor that cannot be compared or differs by a NaN or an
// infinity, else the largest share of its tolerance) and the count. The files pass when they hold
// at least one tensor and every tensor passes.
struct CheckReport {
  std::vector<TensorVerdict> verdicts;
  size_t passed = 0;
  bool pass = false;
  std::string text;  // the lines, each ending in a newline
};
CheckReport check_report(std::vector<TensorVerdict> verdicts);

}  // namespace lathe::ref
