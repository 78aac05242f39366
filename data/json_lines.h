// JSON Lines files (one JSON document a line) that the data layer reads whole: a benchmark's
// multiple-choice items, a fine-tuning run's conversations. The size is checked before anything is
// allocated, each non-blank line is parsed on its own (at most serialize::kMaxJsonLineBytes), and a
// line that cannot be used is reported by its number and skipped: one bad line never costs the
// file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::data {

struct SkippedItem {
  int64_t line = 0;  // 1-based
  std::string reason;
};

// The bytes of `path`, a regular file of at most `max_bytes`; `what` names it in errors
// ("--sft", "multiple-choice file": "<what> <path>: 300000000 bytes, more than the 268435456 it
// may hold").
std::string read_json_lines_file(const std::string& path, const std::string& what, size_t max_bytes);

// Calls `use(line, document)` for each non-blank line of `text` in order; a line that is no JSON
// document, or that `use` refuses with lathe::Error, goes to `skipped` with the reason.
void for_each_json_line(const std::string& text, const std::function<void(int64_t, const nlohmann::json&)>& use,
                        std::vector<SkippedItem>& skipped);

}  // namespace lathe::data
