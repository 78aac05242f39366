#include "core/device_collectives.h"

#include <map>

#include "core/error.h"

namespace lathe {

namespace {
// Filled before main by the backends' static registration, read afterwards only.
std::map<DeviceType, DeviceCollectivesFactory>& factories() {
  static std::map<DeviceType, DeviceCollectivesFactory> r;
  return r;
}
}  // namespace

void register_device_collectives(DeviceType type, DeviceCollectivesFactory factory) {
  factories()[type] = std::move(factory);
}

bool has_device_collectives(DeviceType type) { return factories().count(type) > 0; }

std::unique_ptr<DeviceCollectives> make_device_collectives(const DeviceCollectivesSetup& setup) {
  const auto it = factories().find(setup.device.type);
  LATHE_CHECK(it != factories().end(), "data parallel training on ", setup.device.str(),
              ": this lathe has no collectives for that device (for cuda, build it where NCCL is found)");
  return it->second(setup);
}

}  // namespace lathe
