#include "data/json_lines.h"

#include "core/error.h"
#include "data/corpus_file.h"
#include "serialize/json_document.h"

namespace lathe::data {

std::string read_json_lines_file(const std::string& path, const std::string& what, size_t max_bytes) {
  CorpusFile info;
  FileHandle fd = open_regular_file(path, what, info);
  LATHE_CHECK(info.size <= max_bytes, what, " ", path, ": ", info.size, " bytes, more than the ", max_bytes,
              " it may hold");
  std::string text(info.size, '\0');
  read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

void for_each_json_line(const std::string& text, const std::function<void(int64_t, const nlohmann::json&)>& use,
                        std::vector<SkippedItem>& skipped) {
  int64_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    ++number;
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      use(number, serialize::parse_json_document(line, "line", serialize::kMaxJsonLineBytes));
    } catch (const Error& e) {
      // parse_json_document's messages start with the "line: " it was given; the caller numbers it.
      std::string reason = e.what();
      if (reason.rfind("line: ", 0) == 0) reason = reason.substr(6);
      skipped.push_back({number, reason});
    }
  }
}

}  // namespace lathe::data
