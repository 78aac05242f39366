// lathe info: what this build of lathe is and what it can run on.
#include <cstdio>

#include "core/device.h"
#include "examples/cli/commands.h"
#include "train/distributed/communicator.h"
#include "core/system_info.h"

namespace lathe::cli {

namespace {

nlohmann::json info_json() {
  nlohmann::json j;
  j["version"] = LATHE_VERSION;
  j["build_type"] = LATHE_BUILD_TYPE;
  j["compiler"] = compiler_description();
  j["cpu_features"] = compiled_cpu_features();
  j["openmp_threads"] = openmp_max_threads();
  j["cpus"] = cpu_count();
  j["eigen"] = eigen_version();
  j["cuda_compiled"] = cuda_compiled_in();
  j["cuda_devices"] = cuda_device_count();
  j["mpi"] = dist::mpi_available();  // data parallel training across processes (mpirun)
  std::vector<std::string> devices{"cpu"};
  for (int i = 0; i < kSimDeviceCount; ++i) devices.push_back(Device::sim(i).str());
  for (int i = 0; i < cuda_device_count(); ++i) devices.push_back(Device::cuda(i).str());
  j["devices"] = devices;
  return j;
}

void print_info(bool as_json) {
  const nlohmann::json j = info_json();
  if (as_json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::string features;
  for (const auto& f : j["cpu_features"]) features += (features.empty() ? "" : " ") + f.get<std::string>();
  std::string devices;
  for (const auto& d : j["devices"]) devices += (devices.empty() ? "" : ", ") + d.get<std::string>();
  std::printf("lathe %s (%s build, %s, C++20)\n", LATHE_VERSION, LATHE_BUILD_TYPE,
              compiler_description().c_str());
  std::printf("  CPU features used : %s\n", features.empty() ? "(baseline only)" : features.c_str());
  std::printf("  OpenMP threads    : %d (%d processors online)\n", openmp_max_threads(), cpu_count());
  std::printf("  Eigen             : %s\n", eigen_version().c_str());
  if (!cuda_compiled_in()) {
    std::printf("  CUDA              : not compiled in (configure with -DLATHE_CUDA=ON where the toolkit is)\n");
  } else {
    const int n = cuda_device_count();
    std::printf("  CUDA              : compiled in, %d GPU%s present%s\n", n, n == 1 ? "" : "s",
                n == 0 ? " (cuda devices unavailable)" : "");
  }
  std::printf("  MPI               : %s\n", dist::mpi_available()
                                               ? "compiled in (mpirun -np N lathe train ... trains one run in N processes)"
                                               : "not compiled in (install libopenmpi-dev and reconfigure)");
  std::printf("  devices           : %s\n", devices.c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the version, build, CPU features, threads and devices");
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "print one JSON object instead of text");
  cmd->callback([=] { print_info(*as_json); });
}

}  // namespace lathe::cli
