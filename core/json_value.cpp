#include "core/json_value.h"

#include <cmath>

#include "core/error.h"

namespace lathe {

std::string quote_json(const nlohmann::json& v, size_t max_chars) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

int64_t json_integer(const nlohmann::json& v, int64_t min, int64_t max, const std::string& what) {
  bool fits = false;
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= uint64_t(INT64_MAX);
    value = fits ? int64_t(v.get<uint64_t>()) : 0;
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
    fits = true;
  } else if (v.is_number_float()) {
    // 2^63 is the first double past int64; an integral value below it converts exactly.
    const double d = v.get<double>();
    fits = std::floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    value = fits ? int64_t(d) : 0;
  }
  LATHE_CHECK(fits && value >= min && value <= max, what, " must be an integer from ", min, " to ", max, ", got ",
              quote_json(v));
  return value;
}

}  // namespace lathe
