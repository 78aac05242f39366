#include "data/multiple_choice.h"

#include <charconv>

#include "core/error.h"
#include "core/json_value.h"
#include "data/json_lines.h"

namespace lathe::data {

namespace {

constexpr size_t kMaxBenchmarkBytes = size_t(256) << 20;

// The item of one line's document, or an error (lathe::Error) saying what is wrong with it.
MultipleChoiceItem parse_item(const nlohmann::json& j, int64_t number) {
  LATHE_CHECK(j.is_object(), "not a JSON object");
  const bool hellaswag = j.contains("ctx");
  const char* context_key = hellaswag ? "ctx" : "context";
  const char* endings_key = hellaswag ? "endings" : "choices";
  const char* label_key = hellaswag ? "label" : "answer";
  for (const char* key : {context_key, endings_key, label_key})
    LATHE_CHECK(j.contains(key), "no \"", key, "\" (an item is {\"ctx\", \"endings\", \"label\"} or {\"context\", ",
                "\"choices\", \"answer\"})");
  MultipleChoiceItem item;
  item.line = number;
  LATHE_CHECK(j[context_key].is_string(), "\"", context_key, "\" must be a string, got ", quote_json(j[context_key]));
  item.context = j[context_key].get<std::string>();
  LATHE_CHECK(!item.context.empty(), "\"", context_key, "\" is empty");
  const nlohmann::json& endings = j[endings_key];
  LATHE_CHECK(endings.is_array() && endings.size() >= 2, "\"", endings_key, "\" must list at least two endings, got ",
              quote_json(endings));
  for (size_t i = 0; i < endings.size(); ++i) {
    LATHE_CHECK(endings[i].is_string() && !endings[i].get_ref<const std::string&>().empty(), "ending ", i,
                " must be a non-empty string, got ", quote_json(endings[i]));
    item.endings.push_back(endings[i].get<std::string>());
  }
  nlohmann::json label = j[label_key];
  if (label.is_string()) {  // HellaSwag's own files write "label": "2"
    const std::string& s = label.get_ref<const std::string&>();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    LATHE_CHECK(!s.empty() && ec == std::errc() && end == s.data() + s.size(), "\"", label_key,
                "\" must be the index of the right ending, got ", quote_json(label));
    label = v;
  }
  item.label = json_integer(label, 0, int64_t(item.endings.size()) - 1, std::string("\"") + label_key + "\" (" +
                                                                          std::to_string(item.endings.size()) +
                                                                          " endings)");
  return item;
}

}  // namespace

MultipleChoiceSet read_multiple_choice(const std::string& path) {
  const std::string text = read_json_lines_file(path, "multiple-choice file", kMaxBenchmarkBytes);
  MultipleChoiceSet set;
  for_each_json_line(
      text, [&](int64_t line, const nlohmann::json& j) { set.items.push_back(parse_item(j, line)); }, set.skipped);
  LATHE_CHECK(!set.items.empty(), path, ": no valid item", set.skipped.empty() ? " (the file is empty)" : "",
              set.skipped.empty() ? std::string() : "; line " + std::to_string(set.skipped.front().line) + ": " +
                                                        set.skipped.front().reason);
  return set;
}

}  // namespace lathe::data
