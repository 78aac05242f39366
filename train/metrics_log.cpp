#include "train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"

namespace lathe::train {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  LATHE_CHECK(file_ != nullptr, path, ": cannot open for writing: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  // NaN and infinity are not JSON; nlohmann writes them as null, which readers handle.
  const std::string line = record.dump() + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  LATHE_CHECK(ok, path_, ": write failed: ", std::strerror(errno));
}

double metric_value(const nlohmann::json& record, const char* key, const std::string& where) {
  const nlohmann::json& v = record.at(key);
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  LATHE_CHECK(v.is_number(), where, ": \"", key, "\" must be a number or null, got ", serialize::quote_json(v));
  return v.get<double>();
}

namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One line as a metrics record, or an error naming `where`.
nlohmann::json parse_record(const std::string& line, const std::string& where) {
  nlohmann::json rec = serialize::parse_json_document(line, where, serialize::kMaxJsonLineBytes);
  LATHE_CHECK(rec.is_object() && rec.contains("step") && rec["step"].is_number_integer(), where,
              ": not a metrics record with an integer \"step\": ", serialize::quote_json(rec));
  return rec;
}

}  // namespace

std::vector<nlohmann::json> cut_metrics_log(const std::string& path, int64_t step) {
  const std::string text = read_whole(path);
  std::vector<nlohmann::json> kept;
  std::string out;
  size_t begin = 0;
  for (int64_t number = 1; begin < text.size(); ++number) {
    const size_t end = text.find('\n', begin);
    // Every record is written with its newline in one write: a last line without one is torn.
    if (end == std::string::npos) break;
    const std::string line = text.substr(begin, end - begin);
    const bool last = end + 1 == text.size();
    nlohmann::json rec;
    try {
      rec = parse_record(line, path + ": line " + std::to_string(number));
    } catch (const Error&) {
      if (last) break;  // torn by a full disk, newline included: drop it
      throw;
    }
    if (rec["step"].get<int64_t>() > step) break;
    kept.push_back(std::move(rec));
    out.append(text, begin, end + 1 - begin);
    begin = end + 1;
  }
  if (out.size() != text.size() || !std::ifstream(path).good())
    serialize::write_file_atomically(path, [&](serialize::AtomicFile& f) { f.write(out.data(), out.size()); });
  return kept;
}

}  // namespace lathe::train
