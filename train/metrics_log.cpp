#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace lathe::app {

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

}  // namespace lathe::app
