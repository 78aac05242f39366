// The JSON documents lathe reads from files and flags: checkpoint and weights metadata, model
// configs, reference cases, metrics lines. One parser for all of them, so that every one is
// bounded the same way, and one way to quote a bad value in an error message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lathe::serialize {

// Far deeper than any document lathe writes (its deepest is five levels). nlohmann's dump(),
// copies and comparisons recurse once per level, so a hostile document nested tens of thousands
// deep would overflow the stack long after parsing succeeded.
inline constexpr int kMaxJsonNesting = 64;

// Parses `text`. Throws lathe::Error "<what>: ..." when it is not JSON or nests deeper than
// kMaxJsonNesting; `what` names the file and field (e.g. "run/ckpt-00000020.safetensors: metadata
// \"lathe\"").
nlohmann::json parse_json_document(std::string_view text, const std::string& what);

// `v` as compact JSON of at most `max_chars` characters ("..." when cut), for error messages: a
// bad value is quoted, never dumped whole.
std::string quote_json(const nlohmann::json& v, size_t max_chars = 80);

}  // namespace lathe::serialize
