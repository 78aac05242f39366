// The op registry: every op of core/ops.h once, with everything that is said about it: its name,
// operands and arguments (PyTorch's, for an op of `lathe ref`), the call into core/ops.h, the
// functions and op-table entries it covers, its samples and its tolerance. Everything else reads
// the ops from here: the reference kind "op" (op_case.cpp), the fixtures pack (fixtures.cpp), the
// bundle of samples PyTorch answers (op_samples.cpp; `lathe ref --write-op-samples`), and
// tests/test_op_cases.cpp, which checks every sample against PyTorch's answer, gradchecks it in
// float64, and runs it bitwise on sim and within tolerance on CUDA; it fails when a function of
// core/ops.h or an entry of core/op_table.h's lists has no entry, or an entry no PyTorch answer.
//
// It lives in ref/ rather than core/ because an entry speaks PyTorch: its name, its argument names
// and defaults are torch's (where torch has the op), which core/ must not know.
//
// Adding an op: its entry in op_registry.cpp and its line in the PyTorch table of
// tests/golden/make_op_goldens.py; then `tools/make_op_goldens.sh` writes the samples and PyTorch's
// answers. An entry with in_ref_kind set is also an op of `lathe ref`, answered in every dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace lathe::ref {

// An op's "args" object. Each accessor reads one argument by its name with its default (PyTorch's,
// for an op of the reference kind); a value of the wrong type is an error naming the op and the
// argument.
class OpArgs {
 public:
  OpArgs(std::string op, nlohmann::json args) : op_(std::move(op)), args_(std::move(args)) {}

  const std::string& op() const { return op_; }

  bool given(const char* name) const { return args_.contains(name) && !args_[name].is_null(); }
  int64_t integer(const char* name) const;
  int64_t integer(const char* name, int64_t fallback) const;
  double number(const char* name) const;
  std::optional<double> optional_number(const char* name) const;
  bool flag(const char* name, bool fallback) const;
  // PyTorch's `dim` of a reduction: an integer, a list of integers, or null / absent for every dim
  // (returned as an empty list, which is what lathe's reductions read as "all").
  std::vector<int64_t> dims(const char* name) const;
  std::string choice(const char* name, const std::vector<std::string>& allowed, const std::string& fallback) const;

 private:
  int64_t integer_value(const char* name) const;

  std::string op_;
  nlohmann::json args_;
};

using Operands = std::vector<Tensor>;

// Inputs drawn from Philox under a fixed seed: a sample is the same on every machine and backend.
class Draw {
 public:
  explicit Draw(uint64_t seed) : gen_(seed) {}
  Tensor uniform(const Shape& shape, double lo = -2.0, double hi = 2.0);  // f64
  Tensor ids(const Shape& shape, int64_t high);                           // i64 in [0, high)
  Tensor mask(const Shape& shape);                                        // b8, about half set

 private:
  Generator gen_;
};

// What a sample is for. Every sample runs on every backend against the cpu (tests/test_op_cases.cpp);
// PyTorch also answers the golden ones (`lathe ref --write-op-samples`, then
// tests/golden/make_op_goldens.py), and the fixture ones are the fixtures pack's op cases.
enum class SampleUse {
  fixture,  // a golden sample, also a case of the fixtures pack (an op of the reference kind)
  golden,   // small enough to answer in PyTorch and to gradcheck in float64
  sweep,    // the backends only: long rows, wide blocks, ragged tiles
};

// One input set of an op: its arguments and its operands, drawn (floating operands in f64; a user
// casts them to the dtype it tests).
struct OpSample {
  std::string label;  // "" for the op's first sample, else what sets it apart ("tanh", "ties")
  nlohmann::json args;
  std::function<Operands(Draw&)> inputs;
  SampleUse use = SampleUse::golden;
  // Inputs sit on a kink or a tie (relu at 0, clamp at a bound, equal maxima): a finite-difference
  // gradient check moves them slightly first.
  bool kinks = false;
  // The floating operands are held non-contiguously (strided()) when the op runs.
  bool strided = false;
};

// How far a result may be from another computation of it: |got - want| <= atol + rtol |want|, for
// the result and the gradients. It holds a run on another backend against the cpu's (sim must
// match bitwise) and lathe's f32 against PyTorch's on the golden samples.
struct OpTolerance {
  double rtol = 1e-6;
  double atol = 1e-6;
};

// How many tensor operands an op takes: `least` to `most`, or any number from `least` on (most ==
// kAny). An op with fewer than `most` reads the missing ones as PyTorch does (an absent weight, a
// number argument for the last operand).
struct Arity {
  static constexpr int kAny = -1;
  Arity(int n) : least(n), most(n) {}  // NOLINT(google-explicit-constructor): most ops take a fixed count
  Arity(int lo, int hi) : least(lo), most(hi) {}
  int least, most;
};

// How an error about an op case begins.
inline constexpr const char* kOpCase = "case kind \"op\": ";

struct OpEntry {
  const char* name;    // PyTorch's name of the op (lathe's where PyTorch has none)
  bool in_ref_kind;    // an op of `lathe ref` kind "op", with PyTorch's name, operands and arguments
  std::vector<const char*> covers;  // the functions of core/ops.h and entries of core/op_table.h it runs
  Arity operands;
  std::vector<const char*> args;    // the arguments it takes
  Tensor (*call)(const Operands& x, const OpArgs& a);
  std::vector<OpSample> samples;    // the inputs it is checked on, the first a golden one
  OpTolerance tolerance;
  // The number of elements of the result, for the ops whose result can outgrow their operands
  // (broadcasts, products, lookups); null for the others.
  int64_t (*result_elements)(const Operands& x) = nullptr;
};

// A sample's name: the op's, then its label ("add", "add.bcast").
std::string sample_name(const OpEntry& op, const OpSample& sample);

// The generator a sample draws from, seeded by the sample's name, so that adding or moving a sample
// leaves every other sample's inputs as they were; and the operands it draws there.
Draw sample_draw(const OpEntry& op, const OpSample& sample);
Operands draw_sample(const OpEntry& op, const OpSample& sample);

// The dtypes a sample is answered in (by PyTorch, and in the fixtures pack): the four floating ones
// for an op of the reference kind with a floating operand, f32 alone for the others (their tests
// are lathe's f32 against PyTorch's, and a float64 gradcheck of the f64 draws).
std::vector<DType> sample_dtypes(const OpEntry& op, const OpSample& sample);

// The same values as `t`, held non-contiguously: a tensor of three or more dims with the two before
// its last swapped in memory (the last stays unit-strided), a matrix transposed in memory, a vector
// at every other element of a buffer twice its length.
Tensor strided(const Tensor& t);

// Every op, in a fixed order (the fixtures pack's).
const std::vector<OpEntry>& op_registry();
// The entry named `name`, or null.
const OpEntry* find_op_entry(std::string_view name);

// `args` (an object, empty for none) checked against the arguments `op` takes: an unknown
// one is an error naming it and listing those it takes.
OpArgs read_op_args(const OpEntry& op, const nlohmann::json& args);

}  // namespace lathe::ref
