// Multiple-choice benchmark items, one JSON object per line (JSONL), in either of two forms:
//
//   HellaSwag's   {"ctx": "...", "endings": ["...", ...], "label": 2, ...}   (other fields ignored)
//   generic       {"context": "...", "choices": ["...", ...], "answer": 2}
//
// `label` / `answer` is the index of the right ending, 0-based (HellaSwag's validation file, as
// llm.c and nanochat read it; a label given as a string of digits, as HellaSwag's own JSON has it,
// is taken too). Blank lines are skipped. A bad item -- a line that is not a JSON object of either
// form, fewer than two endings, an empty ending or context, a label out of range -- is not fatal:
// it is reported with its line number and skipped, and the file is refused only when no item is
// left (or it cannot be read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/json_lines.h"

namespace lathe::data {

struct MultipleChoiceItem {
  int64_t line = 0;  // 1-based, for messages and the per-item results
  std::string context;
  std::vector<std::string> endings;
  int64_t label = 0;
};

struct MultipleChoiceSet {
  std::vector<MultipleChoiceItem> items;
  std::vector<SkippedItem> skipped;
};

// Reads `path` (at most 256 MiB; each line at most 1 MiB). Throws lathe::Error naming the file
// when it cannot be read or holds no valid item.
MultipleChoiceSet read_multiple_choice(const std::string& path);

}  // namespace lathe::data
