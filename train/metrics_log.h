// DIR/metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a crash
// or a `tail -f` always sees whole lines. Keys: "step", "loss", "lr", "tok_per_s", and "val_loss"
// on evaluation steps.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace lathe::app {

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

}  // namespace lathe::app
