// Causal attention alone, forward and backward through the op layer, on any device and dtype: the
// figure tools/gpu_check.sh sets beside PyTorch's SDPA (tools/torch_bench_device.py --attention).
//
//   bench_attention [--device D] [--dtype bf16|f16|f32|f64] [--shape B,H,T,D] [--steps N] [--warmup N]
//                   [--attention-backward split|atomic] [--json]
//
// One step: out = causal_attention(q, k, v, 1/sqrt(D)) on q, k, v [B, H, T, D] (leaves that need
// gradients), then out.backward(g), then the device is synchronised; the figure is the mean over
// the timed steps. TFLOP/s counts the products over the visible (query, key) pairs, as FlashAttention's
// benchmarks do for a causal mask: 4 B H T^2 D / 2 forward and 2.5 times that backward.
// (whichever backward runs: FlashAttention-2's atomic one does those 5 products, the split one 7).
// Defaults: cpu, f32, 16,12,1024,64 (GPT-2's attention at batch 16), 10 steps after 3, the split
// backward (core/backend.h; the CPU has one backward and ignores it).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/storage.h"

using namespace lathe;

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_attention: %s\nusage: bench_attention [--device D] [--dtype bf16|f16|f32|f64] "
               "[--shape B,H,T,D] [--steps N] [--warmup N] [--attention-backward split|atomic] [--json]\n",
               why.c_str());
  std::exit(2);
}

int64_t count(const std::string& flag, const std::string& v, int64_t least) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < least || n > 1000000)
    usage(flag + " takes an integer from " + std::to_string(least) + " to 1000000, got '" + v + "'");
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu", dtype_arg = "f32", backward_arg = "split";
  int64_t B = 16, H = 12, T = 1024, D = 64, steps = 10, warmup = 3;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag == "--help" ? "times causal attention forward + backward" : flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--device") device_name = value;
    else if (flag == "--dtype") dtype_arg = value;
    else if (flag == "--steps") steps = count(flag, value, 1);
    else if (flag == "--warmup") warmup = count(flag, value, 0);
    else if (flag == "--attention-backward") backward_arg = value;
    else if (flag == "--shape") {
      int64_t* dims[] = {&B, &H, &T, &D};
      size_t at = 0;
      for (int64_t* d : dims) {
        if (at > value.size()) usage("--shape takes B,H,T,D, got '" + value + "'");
        const size_t comma = value.find(',', at);
        *d = count(flag, value.substr(at, comma == std::string::npos ? std::string::npos : comma - at), 1);
        at = comma == std::string::npos ? value.size() + 1 : comma + 1;
      }
      if (at != value.size() + 1) usage("--shape takes B,H,T,D, got '" + value + "'");
    } else {
      usage("unknown option " + flag);
    }
  }
  try {
    const Device device = Device::parse(device_name);
    set_attention_backward(parse_attention_backward(backward_arg));
    const DType dtype = dtype_arg == "bf16" ? DType::bf16
                        : dtype_arg == "f16" ? DType::f16
                        : dtype_arg == "f32" ? DType::f32
                        : dtype_arg == "f64" ? DType::f64
                                             : (usage("--dtype takes bf16, f16, f32 or f64, got '" + dtype_arg + "'"),
                                                DType::f32);
    auto leaf = [&](uint64_t seed) {
      Tensor t = Tensor::randn({B, H, T, D}, seed, 0, dtype, device);
      t.requires_grad_();
      return t;
    };
    Tensor q = leaf(1), k = leaf(2), v = leaf(3);
    const Tensor g = Tensor::randn({B, H, T, D}, 4, 0, dtype, device);
    const double scale = 1.0 / std::sqrt(double(D));
    auto step = [&] {
      for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
      causal_attention(q, k, v, scale).backward(g);
    };
    Backend& backend = backend_for(device);
    for (int64_t i = 0; i < warmup; ++i) step();
    backend.synchronize(device.index);
    reset_peak_memory(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) step();
    backend.synchronize(device.index);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                      double(steps);
    const double fwd_flops = 4.0 * double(B * H) * double(T) * double(T) * double(D) / 2.0;
    const double tflops = 3.5 * fwd_flops / (ms * 1e-3) / 1e12;
    const double peak_mib = double(memory_stats(device).peak_allocated) / double(1 << 20);
    if (json)
      std::printf("{\"who\": \"lathe\", \"op\": \"causal_attention\", \"device\": \"%s\", \"dtype\": \"%s\", "
                  "\"shape\": [%lld, %lld, %lld, %lld], \"backward\": \"%s\", \"ms_fwd_bwd\": %.4f, "
                  "\"tflop_per_s\": %.2f, \"peak_mib\": %.0f}\n",
                  device.str().c_str(), dtype_name(dtype), (long long)B, (long long)H, (long long)T, (long long)D,
                  backward_arg.c_str(), ms, tflops, peak_mib);
    else
      std::printf("lathe causal_attention %s %s [%lld, %lld, %lld, %lld], %s backward: %.3f ms forward + backward, "
                  "%.1f TFLOP/s, peak %.0f MiB\n",
                  device.str().c_str(), dtype_name(dtype), (long long)B, (long long)H, (long long)T, (long long)D,
                  backward_arg.c_str(), ms, tflops, peak_mib);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
