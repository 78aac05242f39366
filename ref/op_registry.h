// The op registry: every op of core/ops.h once, with what each list of ops needs of it. The
// reference kind "op" (op_case.cpp) finds its ops here, the fixtures pack (fixtures.cpp) draws its
// op cases from here, and tests/test_op_cases.cpp checks every entry (its golden rows against
// PyTorch, a float64 gradcheck, sim bitwise and CUDA within the entry's tolerance over its sweep)
// and fails when a function of core/ops.h or an entry of core/op_table.h's lists has no entry.
//
// It lives in ref/ rather than core/ because an entry speaks PyTorch: its name, its argument names
// and defaults are torch's (where torch has the op), which core/ must not know.
//
// Adding an op: one entry in op_registry.cpp (name, operands, arguments, the call into core/ops.h,
// the functions and op-table entries it covers, its sweep, its tolerance), then its golden rows in
// tests/test_op_cases.cpp. An entry with in_ref_kind set is also an op of `lathe ref` and a case
// of the fixtures pack in every dtype.
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

// One input set of an op: its arguments and its operands, drawn (floating operands in f64; a user
// casts them to the dtype it tests).
struct OpSample {
  const char* name;  // "" for the op's first sample, else what sets it apart ("tanh", "b2h3t70d8")
  nlohmann::json args;
  std::function<Operands(Draw&)> inputs;
  bool fixture = true;  // also a case of the fixtures pack (for an op of the reference kind)
};

// How far another backend's f32 result may be from the cpu's: |got - cpu| <= atol + rtol |cpu|,
// for the result and for the gradients (sim must match bitwise).
struct OpTolerance {
  double rtol = 1e-6;
  double atol = 1e-6;
};

constexpr int kOneOrMore = -1;  // the operand count of cat and stack

// How an error about an op case begins.
inline constexpr const char* kOpCase = "case kind \"op\": ";

struct OpEntry {
  const char* name;    // PyTorch's name of the op (lathe's where PyTorch has none)
  bool in_ref_kind;    // an op of `lathe ref` kind "op", with PyTorch's name, operands and arguments
  std::vector<const char*> covers;  // the functions of core/ops.h and entries of core/op_table.h it runs
  int operands;                     // how many tensor operands, or kOneOrMore
  std::vector<const char*> args;    // the arguments it takes
  Tensor (*call)(const Operands& x, const OpArgs& a);
  std::vector<OpSample> sweep;      // the inputs every backend is compared on
  OpTolerance tolerance;
  // The number of elements of the result, for the ops whose result can outgrow their operands
  // (broadcasts, products, lookups); null for the others.
  int64_t (*result_elements)(const Operands& x) = nullptr;
};

// Every op, in a fixed order (the fixtures pack's).
const std::vector<OpEntry>& op_registry();
// The entry named `name`, or null.
const OpEntry* find_op_entry(std::string_view name);

// `args` (an object, empty for none) checked against the arguments `op` takes: an unknown
// one is an error naming it and listing those it takes.
OpArgs read_op_args(const OpEntry& op, const nlohmann::json& args);

}  // namespace lathe::ref
