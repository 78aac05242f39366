#include "serialize/json_document.h"

#include "core/error.h"

namespace lathe::serialize {

nlohmann::json parse_json_document(std::string_view text, const std::string& what) {
  using json = nlohmann::json;
  // The callback sees each container open at its depth and stops the parse before a level past
  // the limit is built.
  auto bounded = [&](int depth, json::parse_event_t event, json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start)
      LATHE_CHECK(depth < kMaxJsonNesting, what, ": JSON nested deeper than ", kMaxJsonNesting, " levels");
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), bounded);
  } catch (const json::exception& e) {
    LATHE_FAIL(what, ": not valid JSON (", e.what(), ")");
  }
}

std::string quote_json(const nlohmann::json& v, size_t max_chars) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace lathe::serialize
