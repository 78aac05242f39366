// Chapter 9 of the tutorial (docs/tutorial/09-cuda-kernels.md): how a device's kernels plug into
// lathe. The same op runs on cpu and sim (and on cuda when this build has it and a GPU is present).
// Everything that depends on a GPU is written to stderr, so the output the chapter shows is the
// same on every machine.
#include <cmath>
#include <cstring>
#include <iostream>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "tutorial.h"

using namespace lathe;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

// [tutorial:gpu-count]
// GPUs present: 0 when the build has no CUDA backend, or has one but the machine has no GPU (then
// backend_for(cuda:0) throws, naming the problem).
int gpu_count() {
  if (!backend_available(DeviceType::cuda)) return 0;
  try {
    return backend_for(Device::cuda()).device_count();
  } catch (const Error&) {
    return 0;
  }
}
// [/tutorial:gpu-count]

int main() {
  std::cout << std::boolalpha;
  tutorial::part("backends");
  // [tutorial:backends]
  for (DeviceType type : {DeviceType::cpu, DeviceType::sim}) {
    Backend& b = backend_for(Device{type, 0});
    std::cout << b.name() << ": " << b.device_count() << " device(s)\n";
  }
  // [/tutorial:backends]
  // [tutorial:cuda-present]
  std::cerr << "cuda: " << (backend_available(DeviceType::cuda) ? "backend compiled in, " : "not in this build, ")
            << gpu_count() << " GPU(s)\n";
  // [/tutorial:cuda-present]

  tutorial::part("op");
  // [tutorial:op]
  // silu through the op layer on each device: same formula (core/op_table.h), same bits.
  Tensor x = Tensor::randn({2, 4}, /*seed=*/42);
  Tensor y_cpu = silu(x);
  Tensor y_sim = silu(x.to(Device::sim()));
  std::cout << y_cpu << "\n";
  std::cout << "on " << y_sim.device() << ": bitwise equal to cpu: " << bitwise_equal(y_cpu, y_sim) << "\n";
  // [/tutorial:op]

  tutorial::part("backend-call");
  // [tutorial:backend-call]
  // What silu() does below its checks: allocate the output, make one virtual call to the device's
  // backend, which loops (cpu, sim) or launches a kernel (cuda) over every element.
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend_for(x.device()).unary(UnaryOp::silu, x, out);
  std::cout << "backend " << backend_for(x.device()).name() << ", op \"" << op_name(UnaryOp::silu)
            << "\": bitwise equal to silu(x): " << bitwise_equal(out, y_cpu) << "\n";
  // [/tutorial:backend-call]

  // [tutorial:cuda-run]
  if (gpu_count() > 0) {
    Tensor y_gpu = silu(x.to(Device::cuda())).to(Device::cpu());
    std::vector<float> a = y_cpu.to_vector<float>(), g = y_gpu.to_vector<float>();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - g[i])));
    std::cerr << "cuda:0: largest difference from cpu " << worst << "\n";
  } else {
    std::cerr << "cuda: skipped (no GPU here)\n";
  }
  // [/tutorial:cuda-run]
  return 0;
}
