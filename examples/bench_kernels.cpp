// Kernel benchmark: how close lathe's CPU kernels come to what the hardware and Eigen can do,
// for the current thread count (OMP_NUM_THREADS).
//
//   bench_kernels [--reps N] [--section S]    (S: 1-4, one section only)
//
// (1) f32 matmul 1024 x 1024 x 1024: lathe::matmul against a plain Eigen product (noalias) in
//     the same run; target lathe >= 90% of Eigen. The kernel is also timed into a preallocated
//     output, to tell its speed from the cost of allocating the result.
// (2) f32 add of two 16M-element tensors, counting 3 x 64 MB moved, against a plain copy of 16M
//     floats (memcpy in one slice per thread, counting 2 x 64 MB); target lathe::add >= 70% of
//     copy. The add is timed as the whole op (allocating its output) and as the kernel alone.
// (3) the f32 products of a GPT training step (the `nanogpt-cpu`, `small` and `char` presets: each
//     Linear's forward x @ w^T, input gradient dy @ w and weight gradient dy^T @ x), lathe's
//     matmul kernel against one call of the BLAS GEMM the build found (OpenBLAS or Eigen) on the
//     calling thread: the BLAS column only at 1 thread, as the BLAS keeps to one thread here.
// (4) causal attention of the same presets, forward and backward, on q, k and v as head views of
//     one [B, T, 3C] projection (as the model calls it), GFLOP/s of the products over the keys
//     each query sees.
// Each figure is the median of the repetitions after one warm-up run.
#include <omp.h>

// GCC 12 reports a false "may be used uninitialized" inside Eigen's AVX-512 GEMM kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu/gemm.h"
#include "core/ops.h"

using namespace lathe;

namespace {

// Median seconds of each function over `reps` runs, after one warm-up run of each (page faults,
// caches, thread start-up). The functions take turns, so a load change on a shared machine
// affects all of them alike instead of whichever happened to run at the time.
std::vector<double> median_seconds(int reps, const std::vector<std::function<void()>>& fns) {
  std::vector<std::vector<double>> t(fns.size());
  for (const auto& fn : fns) fn();
  for (int r = 0; r < reps; ++r) {
    for (size_t k = 0; k < fns.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      fns[k]();
      auto t1 = std::chrono::steady_clock::now();
      t[k].push_back(std::chrono::duration<double>(t1 - t0).count());
    }
  }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

void verdict(const char* what, double ratio, double target) {
  std::printf("  %-34s %6.1f%%   (target >= %.0f%%: %s)\n", what, 100 * ratio, 100 * target,
              ratio >= target ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15, only = 0;
  auto run = [&](int section) { return only == 0 || only == section; };
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--reps") reps = std::max(1, std::atoi(value.c_str()));
    if (flag == "--section") {
      if (value.size() != 1 || value[0] < '1' || value[0] > '4') {
        std::fprintf(stderr, "bench_kernels: --section takes 1, 2, 3 or 4, got '%s'\n", value.c_str());
        return 2;
      }
      only = value[0] - '0';
    }
  }

  std::printf("bench_kernels: %d OpenMP threads, Eigen %d.%d.%d, median of %d reps\n", omp_get_max_threads(),
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, reps);

  // ---- (1) matmul ----
  if (run(1)) {
    constexpr int64_t n = 1024;
    const double flop = 2.0 * n * n * n;
    Tensor a = Tensor::randn({n, n}, 1), b = Tensor::randn({n, n}, 2), c = Tensor::empty({n, n});
    Eigen::MatrixXf ea = Eigen::MatrixXf::Random(n, n), eb = Eigen::MatrixXf::Random(n, n), ec(n, n);
    Backend& cpu = backend_for(Device::cpu());
    auto t = median_seconds(reps, {[&] { Tensor r = matmul(a, b); },
                                   [&] { ec.noalias() = ea * eb; },
                                   [&] { cpu.matmul(a, b, c); }});
    const double t_lathe = t[0], t_eigen = t[1], t_kernel = t[2];

    std::printf("matmul f32 %ldx%ldx%ld\n", long(n), long(n), long(n));
    std::printf("  lathe::matmul                      %7.1f GFLOP/s  (%.2f ms)\n", flop / t_lathe * 1e-9, t_lathe * 1e3);
    std::printf("  Eigen MatrixXf product (noalias)   %7.1f GFLOP/s  (%.2f ms)\n", flop / t_eigen * 1e-9, t_eigen * 1e3);
    std::printf("  matmul kernel, preallocated output %7.1f GFLOP/s  (%.2f ms)\n", flop / t_kernel * 1e-9, t_kernel * 1e3);
    verdict("lathe::matmul / Eigen", t_eigen / t_lathe, 0.90);
    std::printf("  (kernel / Eigen: %.1f%%)\n", 100 * t_eigen / t_kernel);
  }

  // ---- (2) elementwise add vs copy ----
  if (run(2)) {
    constexpr int64_t n = int64_t(1) << 24;
    const double mb = double(n) * sizeof(float);
    Tensor a = Tensor::randn({n}, 3), b = Tensor::randn({n}, 4);
    Tensor out = Tensor::empty({n});
    Backend& cpu = backend_for(Device::cpu());
    std::vector<float> src(size_t(n), 1.0f), dst(size_t(n), 0.0f);
    auto t = median_seconds(reps, {[&] { cpu.binary(BinaryOp::add, a, b, out); },
                                   [&] {
                                     // The copy uses the same threads as the add, each its own slice.
                                     const int64_t chunk = n / 64;
#pragma omp parallel for schedule(static)
                                     for (int64_t c = 0; c < 64; ++c)
                                       std::memcpy(dst.data() + c * chunk, src.data() + c * chunk,
                                                   size_t(chunk) * sizeof(float));
                                   },
                                   [&] { Tensor c = add(a, b); }});
    const double t_kernel = t[0], t_copy = t[1], t_op = t[2];

    const double gbs_kernel = 3 * mb / t_kernel * 1e-9, gbs_op = 3 * mb / t_op * 1e-9;
    const double gbs_copy = 2 * mb / t_copy * 1e-9;
    std::printf("add f32, 16M elements (3 x 64 MB moved) vs copy (2 x 64 MB)\n");
    std::printf("  add kernel, preallocated output    %7.1f GB/s  (%.2f ms)\n", gbs_kernel, t_kernel * 1e3);
    std::printf("  lathe::add, fresh output           %7.1f GB/s  (%.2f ms)\n", gbs_op, t_op * 1e3);
    std::printf("  copy (memcpy over the same threads) %6.1f GB/s  (%.2f ms)\n", gbs_copy, t_copy * 1e3);
    verdict("lathe::add / copy", gbs_op / gbs_copy, 0.70);
    std::printf("  (kernel / copy: %.1f%%)\n", 100 * gbs_kernel / gbs_copy);
  }

  // ---- (3) the products of a GPT step ----
  if (run(3)) {
    struct Layer {
      const char* preset;
      int64_t rows, in, out;  // rows: batch x block
    };
    const Layer layers[] = {{"nanogpt-cpu c_attn", 768, 128, 384}, {"nanogpt-cpu mlp.c_fc", 768, 128, 512},
                            {"nanogpt-cpu mlp.c_proj", 768, 512, 128}, {"small c_attn", 2048, 128, 384},
                            {"small mlp.c_proj", 2048, 512, 128}, {"char c_attn", 2048, 384, 1152},
                            {"char mlp.c_fc", 2048, 384, 1536}, {"char mlp.c_proj", 2048, 1536, 384},
                            {"char lm_head", 2048, 384, 256}};
    const bool one_thread = omp_get_max_threads() == 1;
    Backend& cpu = backend_for(Device::cpu());
    std::printf("products of a GPT step, f32 GFLOP/s: lathe's kernel%s\n", one_thread ? " / one BLAS call" : "");
    for (const Layer& l : layers) {
      Tensor x = Tensor::randn({l.rows, l.in}, 5), w = Tensor::randn({l.out, l.in}, 6);
      Tensor dy = Tensor::randn({l.rows, l.out}, 7);
      struct Product {
        const char* name;
        Tensor a, b;
      };
      const Product products[] = {{"x @ w^T", x, w.t()}, {"dy @ w", dy, w}, {"dy^T @ x", dy.t(), x}};
      std::printf("  %-24s", l.preset);
      for (const Product& p : products) {
        const int64_t M = p.a.size(0), K = p.a.size(1), N = p.b.size(1);
        Tensor c = Tensor::empty({M, N});
        std::vector<std::function<void()>> fns{[&] { cpu.matmul(p.a, p.b, c); }};
        if (one_thread) {
          const bool ta = p.a.strides()[0] == 1, tb = p.b.strides()[0] == 1;
          fns.push_back([&, ta, tb, M, N, K] {
            cpu::gemm<float>(ta, tb, M, N, K, 1.0f, static_cast<const float*>(p.a.data_ptr()), ta ? M : K,
                             static_cast<const float*>(p.b.data_ptr()), tb ? K : N, 0.0f,
                             static_cast<float*>(c.data_ptr()), N);
          });
        }
        const auto t = median_seconds(reps, fns);
        const double flop = 2.0 * double(M) * double(N) * double(K);
        std::printf("  %s %6.1f", p.name, flop / t[0] * 1e-9);
        if (one_thread) std::printf(" / %5.1f", flop / t[1] * 1e-9);
      }
      std::printf("\n");
    }
  }

  // ---- (4) causal attention ----
  if (run(4)) {
    struct Shape4 {
      const char* preset;
      int64_t B, H, T, hs;
    };
    const Shape4 shapes[] = {{"nanogpt-cpu", 12, 4, 64, 32}, {"small", 16, 4, 128, 32}, {"char", 8, 6, 256, 64}};
    Backend& cpu = backend_for(Device::cpu());
    std::printf("causal attention, f32 GFLOP/s of the visible products (ms per call)\n");
    for (const Shape4& s : shapes) {
      const int64_t C = s.H * s.hs;
      auto heads = [&](const Tensor& t, int64_t i) {
        return t.narrow(2, i * C, C).view({s.B, s.T, s.H, s.hs}).transpose(1, 2);
      };
      Tensor qkv = Tensor::randn({s.B, s.T, 3 * C}, 8), gqkv = Tensor::empty({s.B, s.T, 3 * C});
      Tensor out = Tensor::empty({s.B, s.T, s.H, s.hs}).transpose(1, 2), lse = Tensor::empty({s.B, s.H, s.T});
      Tensor gout = Tensor::randn({s.B, s.T, s.H, s.hs}, 9).transpose(1, 2);
      const double scale = 1.0 / std::sqrt(double(s.hs));
      const auto t = median_seconds(
          reps, {[&] { cpu.causal_attention(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), scale, out, lse); },
                 [&] {
                   cpu.causal_attention_backward(heads(qkv, 0), heads(qkv, 1), heads(qkv, 2), out, lse, gout, scale,
                                                 heads(gqkv, 0), heads(gqkv, 1), heads(gqkv, 2));
                 }});
      // Per head: the forward's two products over the T (T + 1) / 2 visible (query, key) pairs;
      // the backward's four.
      const double fwd = double(s.B * s.H) * 4.0 * double(s.T) * double(s.T + 1) / 2.0 * double(s.hs);
      std::printf("  %-24s  forward %6.1f (%.3f ms)  backward %6.1f (%.3f ms)\n", s.preset, fwd / t[0] * 1e-9,
                  t[0] * 1e3, 2 * fwd / t[1] * 1e-9, t[1] * 1e3);
    }
  }
  return 0;
}
