// Where a tensor's memory lives.
//
//   cpu     host memory, CPU kernels.
//   sim:N   a host-backed device that behaves like an accelerator for placement: its own
//           allocator, an error when mixed with cpu tensors, copies to and from it are counted.
//           It runs the CPU kernels on its own memory, so every placement invariant of docs/design.md
//           is tested in CI on machines without a GPU.
//   cuda:N  an NVIDIA GPU; its backend is registered by cuda/ when lathe is built with CUDA.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace lathe {

enum class DeviceType : uint8_t { cpu, sim, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device sim(int i = 0) { return {DeviceType::sim, i}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  static Device parse(const std::string& s);  // "cpu", "sim", "sim:1", "cuda", "cuda:0"

  bool is_cpu() const { return type == DeviceType::cpu; }
  // Memory the host may read directly (cpu and sim); cuda memory is not.
  bool host_accessible() const { return type != DeviceType::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// Number of sim devices that exist (they are free, so a fixed small number).
constexpr int kSimDeviceCount = 2;

}  // namespace lathe
