// Reading values out of JSON documents (configs, options, case documents) the same way in every
// layer: integers in range and reported as written, a bad value quoted briefly. (Parsing a whole
// document, with its bounds, is serialize/json_document.h's.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace lathe {

// `v` as compact JSON of at most `max_chars` characters ("..." when cut), for error messages: a
// bad value is quoted, never dumped whole. Strings with bytes that are not UTF-8 are shown with
// the replacement character, never echoed raw.
std::string quote_json(const nlohmann::json& v, size_t max_chars = 80);

// An integer field: a JSON integer, or a float with an integral value (JSON has one number type),
// from `min` to `max`. Throws "<what> must be an integer from <min> to <max>, got <value>", the
// value quoted as written (2^64 - 1 is not reported as -1, nor 1e30 as a wrapped integer).
int64_t json_integer(const nlohmann::json& v, int64_t min, int64_t max, const std::string& what);

}  // namespace lathe
