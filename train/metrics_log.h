// DIR/metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a crash
// or a `tail -f` always sees whole lines. Keys: "step", "loss", "lr", "tok_per_s", and "val_loss"
// on evaluation steps. A value that is not finite is written as null (JSON has no NaN) and read
// back as NaN.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::train {

class MetricsLog {
 public:
  // Truncates `path` (a fresh run), or appends to it when `append` (a resumed run).
  MetricsLog(const std::string& path, bool append = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// record[key] as a number: null (how a NaN was written) reads as NaN; anything else that is not a
// number is an error naming `where`.
double metric_value(const nlohmann::json& record, const char* key, const std::string& where);

// A resumed run's metrics: cuts `path` back to its records up to `step` (the checkpoint's), each
// a whole line, and returns them. A torn last line (a full disk or a kill while appending: no
// newline, or not JSON) is dropped; any other line that is not a record with a "step" is an
// error naming the file and the line. A missing file is an empty log.
std::vector<nlohmann::json> cut_metrics_log(const std::string& path, int64_t step);

}  // namespace lathe::train
