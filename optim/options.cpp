#include "optim/options.h"

#include <cmath>

#include "core/json_value.h"

namespace lathe::optim {

NumberCheck learning_rate() {
  return [](const char* opt, double lr) {
    LATHE_CHECK(std::isfinite(lr) && lr >= 0, opt, ": invalid learning rate lr = ", lr, " (must be >= 0)");
  };
}

NumberCheck at_least_zero(std::string what) {
  return [what](const char* opt, double v) {
    LATHE_CHECK(!std::isnan(v) && v >= 0, opt, ": invalid ", what, " = ", v, " (must be >= 0)");
  };
}

NumberCheck above_zero(std::string what) {
  return [what](const char* opt, double v) { LATHE_CHECK(v > 0, opt, ": invalid ", what, " = ", v, " (must be > 0)"); };
}

NumberCheck beta(std::string what) {
  return [what](const char* opt, double v) {
    LATHE_CHECK(v >= 0 && v < 1, opt, ": invalid ", what, " = ", v, " (must be in [0, 1))");
  };
}

NumberCheck finite_at_least_zero(std::string what) {
  return [what](const char* opt, double v) {
    LATHE_CHECK(std::isfinite(v) && v >= 0, opt, ": invalid ", what, " = ", v, " (must be finite and >= 0)");
  };
}

NumberCheck finite_above_zero(std::string what) {
  return [what](const char* opt, double v) {
    LATHE_CHECK(std::isfinite(v) && v > 0, opt, ": invalid ", what, " = ", v, " (must be finite and > 0)");
  };
}

NumberCheck finite(std::string what) {
  return [what](const char* opt, double v) {
    LATHE_CHECK(std::isfinite(v), opt, ": invalid ", what, " = ", v, " (must be finite)");
  };
}

namespace json_read {

double number(const nlohmann::json& v, const std::string& name, const char* opt) {
  LATHE_CHECK(v.is_number(), opt, ": option \"", name, "\" must be a number, got ", v.dump());
  return v.get<double>();
}

bool flag(const nlohmann::json& v, const std::string& name, const char* opt) {
  LATHE_CHECK(v.is_boolean(), opt, ": option \"", name, "\" must be true or false, got ", v.dump());
  return v.get<bool>();
}

int64_t integer(const nlohmann::json& v, const std::string& name, const char* opt, int64_t min) {
  // Read as written: 2^64 is not "not an integer", nor 2^64 - 1 the integer -1.
  return json_integer(v, min, INT64_MAX, std::string(opt) + ": option \"" + name + "\"");
}

std::pair<double, double> number_pair(const nlohmann::json& v, const std::string& name, const char* opt) {
  LATHE_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), opt, ": option \"", name,
              "\" must be a pair of numbers, got ", v.dump());
  return {v[0].get<double>(), v[1].get<double>()};
}

std::array<double, 3> number_triple(const nlohmann::json& v, const std::string& name, const char* opt) {
  LATHE_CHECK(v.is_array() && v.size() == 3 && v[0].is_number() && v[1].is_number() && v[2].is_number(), opt,
              ": option \"", name, "\" must be a list of three numbers, got ", v.dump());
  return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

double number_or_inf(const nlohmann::json& v, const std::string& name, const char* opt) {
  if (v.is_null()) return std::numeric_limits<double>::infinity();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    LATHE_CHECK(s == "inf" || s == "Infinity", opt, ": invalid ", name, " \"", s,
                "\" (a number > 0, or null / \"inf\" for no limit)");
    return std::numeric_limits<double>::infinity();
  }
  LATHE_CHECK(v.is_number(), opt, ": invalid ", name, " ", v.dump(), " (a number > 0, or null / \"inf\")");
  return v.get<double>();
}

}  // namespace json_read
}  // namespace lathe::optim
