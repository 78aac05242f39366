#include "core/device.h"

#include <charconv>
#include <ostream>

#include "core/error.h"

namespace lathe {

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::sim: return "sim:" + std::to_string(index);
    case DeviceType::cuda: return "cuda:" + std::to_string(index);
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

Device Device::parse(const std::string& s) {
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const char* b = s.data() + colon + 1;
    const char* e = s.data() + s.size();
    auto [p, ec] = std::from_chars(b, e, index);
    LATHE_CHECK(ec == std::errc() && p == e && index >= 0, "invalid device '", s,
                "': the index after ':' must be a non-negative integer");
  }
  if (kind == "cpu") {
    LATHE_CHECK(index == 0, "invalid device '", s, "': there is only one cpu device");
    return cpu();
  }
  if (kind == "sim") {
    LATHE_CHECK(index < kSimDeviceCount, "invalid device '", s, "': sim devices are sim:0 to sim:",
                kSimDeviceCount - 1);
    return sim(index);
  }
  if (kind == "cuda") return cuda(index);
  LATHE_FAIL("invalid device '", s, "' (expected cpu, sim[:N] or cuda[:N])");
}

}  // namespace lathe
