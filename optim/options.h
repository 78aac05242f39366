// Typed hyperparameters. Each optimizer keeps its hyperparameters in a plain struct (AdamOptions,
// ...) that update() reads; ONE option list per optimizer says, for every field, its PyTorch name,
// where it lives in the struct, its default and its check. JSON parsing, validation and the JSON
// view (groups_json, checkpoints) are all generated from that list, so PyTorch's names exist only
// at that boundary and a field cannot be added to one side and forgotten on the other.
#pragma once

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace lathe::optim {

// Checks a number; `opt` is the optimizer's name for the message. Throws naming option and value.
using NumberCheck = std::function<void(const char* opt, double value)>;

NumberCheck learning_rate();                 // finite and >= 0
NumberCheck at_least_zero(std::string what);  // "invalid <what> = v (must be >= 0)"
NumberCheck above_zero(std::string what);     // "invalid <what> = v (must be > 0)"
NumberCheck beta(std::string what);           // in [0, 1)
NumberCheck finite_at_least_zero(std::string what);  // "invalid <what> = v (must be finite and >= 0)"
NumberCheck finite_above_zero(std::string what);     // "invalid <what> = v (must be finite and > 0)"
NumberCheck finite(std::string what);                // "invalid <what> = v (must be finite)"

// One hyperparameter: its JSON name, default, JSON reader and writer, check.
template <class O>
struct Option {
  std::string name;
  std::function<void(O&)> set_default;
  std::function<void(O&, const nlohmann::json&, const char* opt)> read;  // wrong JSON type: error
  std::function<nlohmann::json(const O&)> write;
  std::function<void(const O&, const char* opt)> check;  // may be empty
};

// The JSON shapes an option can take (each is a reader, a writer and a default).
namespace json_read {
double number(const nlohmann::json& v, const std::string& name, const char* opt);
bool flag(const nlohmann::json& v, const std::string& name, const char* opt);
// An integer from `min` to INT64_MAX, reported as written when it is not one.
int64_t integer(const nlohmann::json& v, const std::string& name, const char* opt, int64_t min);
std::pair<double, double> number_pair(const nlohmann::json& v, const std::string& name, const char* opt);
std::array<double, 3> number_triple(const nlohmann::json& v, const std::string& name, const char* opt);
// null or "inf" / "Infinity": no limit (JSON has no infinity)
double number_or_inf(const nlohmann::json& v, const std::string& name, const char* opt);
}  // namespace json_read

template <class O>
Option<O> number(std::string name, double O::*m, double def, NumberCheck check = {}) {
  return {name, [=](O& o) { o.*m = def; },
          [=](O& o, const nlohmann::json& v, const char* opt) { o.*m = json_read::number(v, name, opt); },
          [=](const O& o) { return nlohmann::json(o.*m); },
          check ? std::function<void(const O&, const char*)>([=](const O& o, const char* opt) { check(opt, o.*m); })
                : nullptr};
}

template <class O>
Option<O> flag(std::string name, bool O::*m, bool def) {
  return {name, [=](O& o) { o.*m = def; },
          [=](O& o, const nlohmann::json& v, const char* opt) { o.*m = json_read::flag(v, name, opt); },
          [=](const O& o) { return nlohmann::json(o.*m); }, nullptr};
}

// An integer >= 1 (Prodigy's slice_p).
template <class O>
Option<O> positive_integer(std::string name, int64_t O::*m, int64_t def) {
  return {name, [=](O& o) { o.*m = def; },
          [=](O& o, const nlohmann::json& v, const char* opt) { o.*m = json_read::integer(v, name, opt, 1); },
          [=](const O& o) { return nlohmann::json(o.*m); },
          [=](const O& o, const char* opt) {
            LATHE_CHECK(o.*m >= 1, opt, ": invalid ", name, " = ", o.*m, " (must be an integer >= 1)");
          }};
}

// Two numbers stored as one JSON pair (PyTorch's betas).
template <class O>
Option<O> number_pair(std::string name, double O::*a, double O::*b, std::pair<double, double> def, NumberCheck check_a,
                      NumberCheck check_b) {
  return {name, [=](O& o) { std::tie(o.*a, o.*b) = def; },
          [=](O& o, const nlohmann::json& v, const char* opt) {
            std::tie(o.*a, o.*b) = json_read::number_pair(v, name, opt);
          },
          [=](const O& o) { return nlohmann::json::array({o.*a, o.*b}); },
          [=](const O& o, const char* opt) {
            check_a(opt, o.*a);
            check_b(opt, o.*b);
          }};
}

// Three numbers stored as one JSON list (Muon's ns_coefficients), each checked by `check`.
template <class O>
Option<O> number_triple(std::string name, std::array<double, 3> O::*m, std::array<double, 3> def, NumberCheck check) {
  return {name, [=](O& o) { o.*m = def; },
          [=](O& o, const nlohmann::json& v, const char* opt) { o.*m = json_read::number_triple(v, name, opt); },
          [=](const O& o) { return nlohmann::json((o.*m)); },
          [=](const O& o, const char* opt) {
            for (size_t k = 0; k < 3; ++k) check(opt, (o.*m)[k]);
          }};
}

// A number that may be absent: null, the default (Prodigy's beta3 = None).
template <class O>
Option<O> optional_number(std::string name, std::optional<double> O::*m, NumberCheck check) {
  return {name, [=](O& o) { o.*m = std::nullopt; },
          [=](O& o, const nlohmann::json& v, const char* opt) {
            o.*m = v.is_null() ? std::nullopt : std::optional<double>(json_read::number(v, name, opt));
          },
          [=](const O& o) { return (o.*m) ? nlohmann::json(*(o.*m)) : nlohmann::json(nullptr); },
          [=](const O& o, const char* opt) {
            if (o.*m) check(opt, *(o.*m));
          }};
}

// A number whose default is infinity, written as null (Prodigy's growth_rate).
template <class O>
Option<O> number_or_inf(std::string name, double O::*m, NumberCheck check) {
  return {name, [=](O& o) { o.*m = std::numeric_limits<double>::infinity(); },
          [=](O& o, const nlohmann::json& v, const char* opt) { o.*m = json_read::number_or_inf(v, name, opt); },
          [=](const O& o) { return std::isinf(o.*m) ? nlohmann::json(nullptr) : nlohmann::json(o.*m); },
          [=](const O& o, const char* opt) { check(opt, o.*m); }};
}

template <class O>
struct OptionList {
  std::vector<Option<O>> options;
  // A check across options (SGD: nesterov needs momentum); may be empty.
  std::function<void(const O&, const char* opt)> check_all;

  O defaults() const {
    O o{};
    for (const auto& op : options) op.set_default(o);
    return o;
  }

  // `base` with the keys of `json` read over it ("params" is ignored), then checked. Unknown keys,
  // wrong JSON types and invalid values are errors naming the optimizer, the option and the value.
  O parse(const char* opt, const nlohmann::json& json, const O& base) const {
    O o = base;
    if (json.is_null()) return checked(opt, o);
    LATHE_CHECK(json.is_object(), opt, ": group options must be a JSON object, got ", json.dump());
    for (auto it = json.begin(); it != json.end(); ++it) {
      if (it.key() == "params") continue;
      const Option<O>* op = nullptr;
      for (const auto& cand : options)
        if (cand.name == it.key()) op = &cand;
      LATHE_CHECK(op != nullptr, opt, ": unknown option \"", it.key(), "\"");
      op->read(o, it.value(), opt);
    }
    return checked(opt, o);
  }

  // The JSON view, under PyTorch's names.
  nlohmann::json to_json(const O& o) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& op : options) j[op.name] = op.write(o);
    return j;
  }

 private:
  O checked(const char* opt, const O& o) const {
    for (const auto& op : options)
      if (op.check) op.check(o, opt);
    if (check_all) check_all(o, opt);
    return o;
  }
};

}  // namespace lathe::optim
