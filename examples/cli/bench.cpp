// lathe bench: time GPT training steps (forward + backward + AdamW) on random tokens, as
// tools/torch_gpt_reference.py does for PyTorch, so the two print comparable numbers.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "core/backend.h"
#include "core/format.h"
#include "core/kernel_profile.h"
#include "core/ops.h"
#include "core/storage.h"
#include "examples/cli/commands.h"
#include "nn/precision.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "nn/flops.h"
#include "train/model_config.h"
#include "core/system_info.h"
#include "core/thread_governor.h"
#include "train/train_step.h"

namespace lathe::cli {

namespace {

struct BenchOptions {
  std::string config = "char";
  std::string device = "cpu";
  int64_t steps = 10;
  int64_t warmup = 2;
  int64_t batch = 0;  // 0: the preset's
  int threads = 0;
  std::string precision = "f32";
  bool tf32 = false;
  std::string attention_backward = "split";
  // MFU's denominator: an H100 SXM's dense BF16 tensor-core peak, the figure nanoGPT and llm.c
  // (and tools/torch_bench_device.py) report MFU against, whatever the precision.
  double peak_tflops = 989.4;
  bool json = false;
  bool profile = false;
};

// A benchmark times a few steps; counts far past these are typing mistakes that would run for days
// (steps) or allocate activations no machine holds (batch), not measurements.
constexpr int64_t kMaxBenchSteps = 100000;
constexpr int64_t kMaxBenchBatch = 4096;
constexpr int kMaxBenchThreads = 1024;

void check_range(const char* flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw UsageError(std::string(flag) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     std::to_string(v));
}

// The rate this machine multiplies f32 matrices at, at the thread count in force: the best of a
// few 1024^3 products, a yardstick for the products of a step's shapes.
double gemm_rate_gflops() {
  const Tensor a = Tensor::randn({1024, 1024}, /*seed=*/3), b = Tensor::randn({1024, 1024}, /*seed=*/4);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor c = matmul(a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * 1024.0 * 1024.0 * 1024.0 / best / 1e9;
}

// `--profile`: runs `steps` more steps with every CPU kernel timed (core/kernel_profile.h) and
// prints each kernel's share of a step, and its GFLOP/s against the machine's peak (its vector
// units' multiply-add rate, which nothing exceeds) and against the 1024^3 GEMM.
void print_profile(int64_t steps, const std::function<void()>& step) {
  profile::take();
  profile::set_enabled(true);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) step();
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(steps);
  profile::set_enabled(false);
  const std::vector<profile::KernelRow> rows = profile::take();
  const double peak = cpu_fma_peak_gflops(), gemm = gemm_rate_gflops();
  std::printf("  kernel profile, %lld steps of %.1f ms, %d threads; peak: f32 multiply-adds %.1f GFLOP/s, "
              "f32 GEMM 1024^3 %.1f GFLOP/s (%.0f%% of peak)\n",
              (long long)steps, step_s * 1e3, openmp_max_threads(), peak, gemm, 100.0 * gemm / peak);
  std::printf("  %-24s %9s %10s %7s %10s %8s %8s\n", "kernel", "calls/step", "ms/step", "share", "GFLOP/s", "of peak",
              "of GEMM");
  double in_kernels = 0;
  for (const profile::KernelRow& r : rows) {
    const double ms = r.seconds / double(steps) * 1e3;
    in_kernels += r.seconds;
    std::printf("  %-24s %9.0f %10.2f %6.1f%%", r.kernel.c_str(), double(r.calls) / double(steps), ms,
                100.0 * r.seconds / double(steps) / step_s);
    if (r.flops > 0) {
      const double gflops = r.flops / r.seconds / 1e9;
      std::printf(" %10.1f %7.1f%% %7.1f%%", gflops, 100.0 * gflops / peak, 100.0 * gflops / gemm);
    }
    std::printf("\n");
  }
  const double outside = step_s - in_kernels / double(steps);
  std::printf("  %-24s %9s %10.2f %6.1f%%\n", "(outside kernels)", "", outside * 1e3, 100.0 * outside / step_s);
  // The limit: were every other kernel free and every product at the peak, a step would still take
  // its products' FLOPs at that rate. No program runs this model's step faster on this machine.
  double product_flops = 0;
  for (const profile::KernelRow& r : rows) product_flops += r.flops;
  const double bound_ms = product_flops / double(steps) / (peak * 1e9) * 1e3;
  std::printf("  bound: %.2f GFLOP of products a step take %.1f ms at the peak; this step is at %.0f%% of that speed\n",
              product_flops / double(steps) / 1e9, bound_ms, 100.0 * bound_ms / (step_s * 1e3));
}

void run_bench(const BenchOptions& o) {
  check_range("--steps", o.steps, 1, kMaxBenchSteps);
  check_range("--warmup", o.warmup, 0, kMaxBenchSteps);
  check_range("--batch", o.batch, 0, kMaxBenchBatch);
  check_range("--threads", o.threads, 0, kMaxBenchThreads);
  // A peak below a GFLOP/s is no machine's (and 1e-300 printed an MFU of 300 digits).
  if (!(o.peak_tflops >= 1e-3 && o.peak_tflops <= 1e6))
    throw UsageError("--peak-tflops must be a number of TFLOP/s from 0.001 to 1e6");
  if (o.profile && o.json) throw UsageError("--profile prints a table; it does not go with --json");
  if (o.profile && o.device != "cpu")
    throw UsageError("--profile times the CPU kernels; it does not go with --device " + o.device);
  train::ModelChoice choice;
  Device device;
  nn::Precision precision = nn::Precision::f32;
  try {
    precision = nn::parse_precision(o.precision, "--precision");
    choice = train::resolve_model_config(o.config);
    device = Device::parse(o.device);
    // As train: a model that cannot fit is refused before anything is allocated.
    if (device.type != DeviceType::cuda) {
      train::check_model_fits_memory(choice.config, "--config " + o.config);
      const int64_t batch = o.batch > 0 ? o.batch : choice.default_batch;
      train::check_batch_fits_memory(choice.config, batch, "--batch " + std::to_string(batch));
    }
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  ThreadGovernor threads(o.threads);
  set_allow_tf32(o.tf32);
  set_attention_backward(parse_attention_backward(o.attention_backward));
  if (o.tf32 && device.type != DeviceType::cuda)
    std::fprintf(stderr, "lathe: note: --tf32 is for f32 products on cuda; the %s device ignores it\n",
                 device.str().c_str());
  const nn::GPTConfig& c = choice.config;
  const int64_t B = o.batch > 0 ? o.batch : choice.default_batch, T = c.block_size;

  nn::GPT model(c, /*seed=*/0, device);
  model.set_precision(precision);
  // As gpt_torch.py: one group, AdamW(lr=3e-4, weight_decay=0.1).
  optim::AdamW opt(model.parameters(), {{"lr", 3e-4}, {"weight_decay", 0.1}}, device.type == DeviceType::cuda);
  // As train: the fused AdamW writes the 16-bit weight copies, so a 16-bit step casts no weight.
  const auto weight_copies = train::connect_weight_copies(model, opt);
  // fp16 steps as `lathe train` takes them: scaled loss, unscale (one read of the inf check), step, update.
  optim::GradScaler scaler(optim::GradScalerOptions{.enabled = nn::needs_loss_scaling(precision)});
  const Tensor x = Tensor::randint(0, c.vocab_size, {B, T}, /*seed=*/1, 0, DType::i64, device);
  const Tensor y = Tensor::randint(0, c.vocab_size, {B, T}, /*seed=*/2, 0, DType::i64, device);
  auto step = [&] {
    threads.update();
    const Tensor loss = model.loss(x, y);
    opt.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  };
  Backend& backend = backend_for(device);
  for (int64_t i = 0; i < o.warmup; ++i) step();
  backend.synchronize(device.index);
  reset_cast_count();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.steps; ++i) step();
  backend.synchronize(device.index);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(o.steps);
  // Each cast is a kernel launch and a pass over its tensor on a GPU (16-bit runs).
  const double casts = double(cast_count()) / double(o.steps);

  const double tokens = double(B * T);
  // An untied token embedding is only looked up; its own lm_head multiplies.
  const int64_t matmul_params = model.num_params(/*exclude_position_embeddings=*/true) -
                                (c.tie_embeddings ? 0 : model.transformer.wte.weight.numel());
  const double flops = nn::training_flops_per_token(matmul_params, c.n_layer, c.n_embd, T) * tokens;
  const size_t peak_rss = peak_rss_bytes();
  const size_t peak_device = memory_stats(device).peak_allocated;
  const double mfu = flops / seconds / (o.peak_tflops * 1e12);
  if (o.json) {
    nlohmann::json j = {{"config", choice.name},  {"device", device.str()},  {"params", model.num_params()},
                        {"precision", nn::precision_name(precision)}, {"tf32", o.tf32},
                        {"attention_backward", o.attention_backward},
                        {"batch", B},             {"seq_len", T},            {"threads", openmp_max_threads()},
                        {"steps", o.steps},       {"ms_per_step", seconds * 1e3}, {"tok_per_s", tokens / seconds},
                        {"gflop_per_s", flops / seconds / 1e9}, {"mfu", mfu}, {"peak_tflops", o.peak_tflops},
                        {"peak_rss_bytes", peak_rss}, {"peak_device_bytes", peak_device}, {"casts_per_step", casts},
                        {"version", LATHE_VERSION}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("lathe %s config=%s params=%lld batch=%lld seq=%lld device=%s precision=%s threads=%d\n",
              LATHE_VERSION, choice.name.c_str(), (long long)model.num_params(), (long long)B, (long long)T,
              device.str().c_str(), nn::precision_name(precision), openmp_max_threads());
  std::printf("  %.1f ms/step  %.0f tok/s  %.2f GFLOP/s  MFU %.3g%% of %g TFLOP/s  (%lld timed steps after %lld warm-up)\n",
              seconds * 1e3, tokens / seconds, flops / seconds / 1e9, 100.0 * mfu, o.peak_tflops, (long long)o.steps,
              (long long)o.warmup);
  std::printf("  peak memory: process RSS %s, %s allocator %s\n", lathe::format_bytes(peak_rss).c_str(),
              device.str().c_str(), lathe::format_bytes(peak_device).c_str());
  std::printf("  %.0f dtype casts per step\n", casts);
  if (o.profile) print_profile(o.steps, step);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time GPT training steps (forward, backward, AdamW) on random tokens");
  cmd->footer(
      "GFLOP/s counts 6 * N * tokens (N: parameters except position embeddings) plus the attention\n"
      "products 12 * n_layer * n_embd * seq_len per token (nn/flops.h); MFU is that rate over\n"
      "--peak-tflops. Peak memory is the process's RSS and the device allocator's peak.\n"
      "Compare with: python3 tools/torch_gpt_reference.py bench CONFIG THREADS");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("--config", o->config, "model preset (tiny, small, char, nanogpt-cpu, speedrun-small, gpt2) or a JSON file")->capture_default_str();
  cmd->add_option("--steps", o->steps, "timed steps (at most 100000)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first (at most 100000)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  cmd->add_option("--batch", o->batch, "sequences per step, at most 4096 (default: the preset's: tiny 8, small 16, char 8, nanogpt-cpu 12, speedrun-small 16, gpt2 4)");
  cmd->add_option("--threads", o->threads, "CPU threads, at most 1024 (default: OMP_NUM_THREADS, else as many as other processes leave cores free, checked as it runs)");
  cmd->add_option("--precision", o->precision, "f32, bf16 or fp16 (fp16 with the loss scaler), as lathe train")
      ->capture_default_str();
  cmd->add_flag("--tf32", o->tf32, "f32 products on TF32 tensor cores (cuda; ignored on cpu), as lathe train");
  cmd->add_option("--attention-backward", o->attention_backward,
                  "split (deterministic) or atomic (FlashAttention-2's one kernel; cuda only), as lathe train")
      ->capture_default_str()
      ->check(attention_backward_check());
  cmd->add_option("--peak-tflops", o->peak_tflops,
                  "the device's peak for MFU, in TFLOP/s (default: an H100 SXM's dense BF16 peak)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON line");
  cmd->add_flag("--profile", o->profile, "then run --steps more steps with every CPU kernel timed and print each one's share and GFLOP/s");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace lathe::cli
