// The CUDA backend against the CPU backend: every kernel on random inputs (normalized MSE at most
// 1e-7 for f32, looser stated bounds for 16-bit floats, bit-exact where the arithmetic is the
// same), the Philox contract, the caching allocator's statistics and out-of-memory error,
// transfer counters, determinism, and bad indices reported as errors.
//
// Without a CUDA build or without a GPU each case is skipped (tests/gpu_cases.h: ctest reports it
// as skipped); one case checks that a GPU-less machine gets a clear error instead of a crash. The
// emulator (cuda/emulator/README.md) runs every case on the CPU as "emu:cuda: ...".
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "tests/gpu_cases.h"
#include "tests/residual_norm_cases.h"

using namespace lathe;
using lathe::testing::gpu_count;

namespace {

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::bf16, DType::f16};
const std::vector<DType> kAllTypes = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                      DType::i32, DType::i64, DType::b8};

std::vector<double> host_values(const Tensor& t) { return t.to(kCpu).to(DType::f64).contiguous().to_vector<double>(); }

// sum((got - want)^2) / sum(want^2); NaN in the same places counts as equal, elsewhere as 1.
double nmse(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const auto g = host_values(got), w = host_values(want);
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (!(std::isnan(w[i]) && std::isnan(g[i]))) return 1.0;
      continue;
    }
    if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (g[i] != w[i]) return 1.0;
      continue;
    }
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return den > 0 ? num / den : num;
}

// Bit-exact values (NaN matches NaN).
bool same_values(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) return false;
  const auto g = host_values(got), w = host_values(want);
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])))) return false;
  return true;
}

// The bound a dtype's results must meet against the CPU.
double tolerance(DType t) {
  switch (t) {
    case DType::f64: return 1e-20;
    case DType::f32: return 1e-7;
    case DType::f16: return 1e-5;   // a few ulp of 2^-11 in rare elements
    case DType::bf16: return 1e-4;  // a few ulp of 2^-8 in rare elements
    default: return 0;
  }
}

// Random normal values of `dtype` on the CPU (integers: rounded from 10 * normal).
Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype, double scale = 1.0) {
  Tensor x = Tensor::randn(shape, seed, 0, DType::f64);
  if (is_floating(dtype)) return mul(x, scale).to(dtype);
  return mul(x, 10.0 * scale).to(dtype);
}

std::string ctx(const char* what, DType t) { return std::string(what) + " " + dtype_name(t); }

// One 16-bit rounding of an exact value, per element: to nearest even (what lathe's kernels must
// do), or toward zero (the nearest wrong variant). A 16-bit value is exact in a double.
double rounded_to(DType t, double v) { return Tensor::full({1}, v, DType::f64).to(t).to(DType::f64).item(); }
double truncated_to(DType t, double v) {
  const double near = rounded_to(t, v);
  if (std::abs(near) <= std::abs(v)) return near;
  // One step toward zero: the spacing just below |near| (half its own at a power of two).
  const int mantissa = t == DType::bf16 ? 7 : 10;
  int e = 0;
  std::frexp(std::abs(near), &e);  // |near| in [2^(e-1), 2^e)
  double step = std::ldexp(1.0, e - 1 - mantissa);
  if (std::abs(near) == std::ldexp(1.0, e - 1)) step /= 2;
  return near - std::copysign(step, near);
}
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
// The share of elements of `got` equal to `want`'s.
double share_equal(const std::vector<double>& got, const std::vector<double>& want) {
  size_t same = 0;
  for (size_t i = 0; i < got.size(); ++i) same += got[i] == want[i];
  return double(same) / double(got.size());
}

}  // namespace

// ---------------------------------------------------------------- availability

TEST_CASE("cuda: a machine without a GPU gets a clear error, not a crash") {
  const int n = gpu_count();
  if (n < 0) {
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, kGpu), doctest::Contains("no CUDA backend"), Error);
    return;
  }
  if (n == 0) {
    MESSAGE("the CUDA backend is registered and reports no GPU");
    CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, kGpu), doctest::Contains("no GPU was found"), Error);
    CHECK_THROWS_AS(Tensor::ones({3}).to(kGpu), Error);
    return;
  }
  CHECK(backend_for(kGpu).name() == "cuda");
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}, DType::f32, Device::cuda(n)), doctest::Contains("does not exist"), Error);
}

// ---------------------------------------------------------------- data movement

TEST_CASE("cuda: round trip and strided copies with casts among all dtypes") {
  GPU_CASE();
  for (DType from : kAllTypes) {
    const Tensor base = random_tensor({6, 7, 5}, 11, from);
    const Tensor g = base.to(kGpu);
    CHECK(same_values(g.to(kCpu), base));
    for (DType to : kAllTypes) {
      INFO(ctx("from", from), " ", ctx("to", to));
      // Contiguous cast, a transposed view and a stepped slice.
      CHECK(same_values(g.to(to), base.to(to)));
      CHECK(same_values(g.transpose(0, 2).to(to), base.transpose(0, 2).to(to)));
      CHECK(same_values(g.slice(1, 1, 7, 2).permute({2, 0, 1}).to(to), base.slice(1, 1, 7, 2).permute({2, 0, 1}).to(to)));
      // A broadcast source into a strided destination.
      Tensor dg = Tensor::zeros({5, 6}, to, kGpu), dc = Tensor::zeros({5, 6}, to);
      dg.t().copy_(g.select(1, 3).select(1, 2).unsqueeze(1).expand({6, 5}));
      dc.t().copy_(base.select(1, 3).select(1, 2).unsqueeze(1).expand({6, 5}));
      CHECK(same_values(dg, dc));
    }
  }
}

TEST_CASE("cuda: fill and arange match the CPU exactly") {
  GPU_CASE();
  for (DType t : kAllTypes) {
    INFO(std::string(dtype_name(t)));
    for (double v : {0.0, 1.0, -2.5, 0.1, 1e30})
      CHECK(same_values(Tensor::full({1001}, v, t, kGpu), Tensor::full({1001}, v, t)));
    CHECK(same_values(Tensor::arange(-7, 1000, 3, t, kGpu), Tensor::arange(-7, 1000, 3, t)));
  }
}

TEST_CASE("cuda: Philox random numbers are the CPU's numbers") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    INFO(std::string(dtype_name(t)));
    for (uint64_t offset : {uint64_t(0), uint64_t(12345), uint64_t(1) << 40}) {
      CHECK(same_values(Tensor::rand({100003}, 42, offset, t, kGpu), Tensor::rand({100003}, 42, offset, t)));
      // Box-Muller goes through log and cos in f64: the GPU's and glibc's agree to the last bit of
      // f64 almost always, so the f32 results are equal but for rare one-ulp differences.
      const auto g = host_values(Tensor::randn({100003}, 7, offset, t, kGpu));
      const auto c = host_values(Tensor::randn({100003}, 7, offset, t));
      int differ = 0;
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (g[i] != c[i]) ++differ;
        worst = std::max(worst, std::abs(g[i] - c[i]) / std::max(1.0, std::abs(c[i])));
      }
      CHECK(differ <= 10);
      CHECK(worst <= (t == DType::bf16 ? 1e-2 : t == DType::f16 ? 1e-3 : 1e-6));
    }
  }
  // A dropout mask drawn on the GPU equals the CPU's.
  Generator gc(5), gg(5);
  const Tensor x = Tensor::ones({4096});
  CHECK(same_values(dropout(x.to(kGpu), 0.3, true, gg), dropout(x, 0.3, true, gc)));
}

// ---------------------------------------------------------------- elementwise

TEST_CASE("cuda: unary ops on float dtypes, contiguous and strided") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    const Tensor x = random_tensor({33, 65}, 3, t, 2.0);
    const Tensor pos = add(abs(x), 0.25);
    const Tensor xg = x.to(kGpu), pg = pos.to(kGpu);
    struct Case {
      const char* name;
      std::function<Tensor(const Tensor&)> f;
      bool positive;
    };
    const std::vector<Case> cases = {
        {"neg", [](const Tensor& v) { return neg(v); }, false},
        {"exp", [](const Tensor& v) { return exp(v); }, false},
        {"log", [](const Tensor& v) { return log(v); }, true},
        {"sqrt", [](const Tensor& v) { return sqrt(v); }, true},
        {"rsqrt", [](const Tensor& v) { return rsqrt(v); }, true},
        {"tanh", [](const Tensor& v) { return tanh(v); }, false},
        {"gelu", [](const Tensor& v) { return gelu(v); }, false},
        {"relu", [](const Tensor& v) { return relu(v); }, false},
        {"sigmoid", [](const Tensor& v) { return sigmoid(v); }, false},
        {"abs", [](const Tensor& v) { return abs(v); }, false},
        {"square", [](const Tensor& v) { return square(v); }, false},
        {"pow", [](const Tensor& v) { return pow(v, 2.5); }, true},
        {"clamp", [](const Tensor& v) { return clamp(v, -0.5, 0.75); }, false},
        {"clamp_lo", [](const Tensor& v) { return clamp(v, -0.5, std::nullopt); }, false},
        {"clamp_hi", [](const Tensor& v) { return clamp(v, std::nullopt, 0.3); }, false},
        {"affine", [](const Tensor& v) { return add(mul(v, 1.5), -0.25); }, false},
    };
    for (const auto& c : cases) {
      INFO(ctx(c.name, t));
      const Tensor& in_c = c.positive ? pos : x;
      const Tensor& in_g = c.positive ? pg : xg;
      CHECK(nmse(c.f(in_g), c.f(in_c)) <= tolerance(t));
      CHECK(nmse(c.f(in_g.t()), c.f(in_c.t())) <= tolerance(t));
    }
    // The sign kernel, which only abs's backward runs, on its own.
    {
      INFO(ctx("sign", t));
      Tensor og = Tensor::empty(x.shape(), t, kGpu), oc = Tensor::empty(x.shape(), t);
      backend_for(kGpu).unary(UnaryOp::sign, xg, og, 0, 0);
      backend_for(kCpu).unary(UnaryOp::sign, x, oc, 0, 0);
      CHECK(nmse(og, oc) <= tolerance(t));
    }
  }
  // NaN: clamp keeps it, relu and sign map it as the CPU does.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor special = Tensor::from_vector<float>({float(nan), -0.0f, 0.0f, INFINITY, -INFINITY, 3.0f}, {6});
  for (auto f : {+[](const Tensor& v) { return clamp(v, -1.0, 1.0); }, +[](const Tensor& v) { return relu(v); },
                 +[](const Tensor& v) { return abs(v); }, +[](const Tensor& v) { return exp(v); }})
    CHECK(same_values(f(special.to(kGpu)), f(special)));
}

TEST_CASE("cuda: unary ops on integer dtypes are exact") {
  GPU_CASE();
  for (DType t : {DType::i32, DType::i64}) {
    const Tensor x = random_tensor({17, 9}, 4, t);
    const Tensor g = x.to(kGpu);
    INFO(std::string(dtype_name(t)));
    CHECK(same_values(neg(g), neg(x)));
    CHECK(same_values(abs(g), abs(x)));
    CHECK(same_values(square(g), square(x)));
    CHECK(same_values(relu(g), relu(x)));
    CHECK(same_values(clamp(g, -3.0, 5.0), clamp(x, -3.0, 5.0)));
    CHECK_THROWS_AS(backend_for(kGpu).unary(UnaryOp::exp, g, Tensor::empty(g.shape(), t, kGpu), 0, 0), Error);
  }
}

TEST_CASE("cuda: binary ops with broadcasting, scalars and NaN") {
  GPU_CASE();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : kFloatTypes) {
    Tensor a = random_tensor({3, 1, 50}, 5, t);
    Tensor b = random_tensor({4, 50}, 6, t);
    // NaN in a few places for maximum/minimum.
    a = where(gt(random_tensor({3, 1, 50}, 9, DType::f32), Tensor::scalar(1.5)), Tensor::scalar(nan, t), a);
    const Tensor ag = a.to(kGpu), bg = b.to(kGpu);
    const Tensor bpos = add(abs(b), 0.5), bposg = bpos.to(kGpu);
    INFO(std::string(dtype_name(t)));
    CHECK(nmse(add(ag, bg), add(a, b)) <= tolerance(t));
    CHECK(nmse(sub(ag, bg), sub(a, b)) <= tolerance(t));
    CHECK(nmse(mul(ag, bg), mul(a, b)) <= tolerance(t));
    CHECK(nmse(div(ag, bposg), div(a, bpos)) <= tolerance(t));
    CHECK(nmse(pow(bposg, ag), pow(bpos, a)) <= tolerance(t));
    CHECK(same_values(maximum(ag, bg), maximum(a, b)));
    CHECK(same_values(minimum(bg, ag), minimum(b, a)));
    CHECK(nmse(add(ag, 2.0), add(a, 2.0)) <= tolerance(t));
    CHECK(nmse(3.0 * bg, 3.0 * b) <= tolerance(t));
    for (auto cmp : {&eq, &ne, &lt, &le, &gt, &ge}) CHECK(same_values(cmp(ag, bg), cmp(a, b)));
    // Fused backward kernels.
    for (BinaryOp op : {BinaryOp::gelu_backward, BinaryOp::tanh_backward, BinaryOp::sigmoid_backward,
                        BinaryOp::relu_backward}) {
      INFO(std::string(op_name(op)));
      const Tensor x = random_tensor({40, 30}, 8, t), gy = random_tensor({40, 30}, 10, t);
      Tensor og = Tensor::empty(x.shape(), t, kGpu), oc = Tensor::empty(x.shape(), t);
      backend_for(kGpu).binary(op, x.to(kGpu), gy.to(kGpu), og);
      backend_for(kCpu).binary(op, x, gy, oc);
      CHECK(nmse(og, oc) <= tolerance(t));
    }
  }
  for (DType t : {DType::i32, DType::i64}) {
    const Tensor a = random_tensor({20, 30}, 12, t);
    const Tensor b = add(abs(random_tensor({30}, 13, t)), 1.0);  // no zero divisors
    INFO(std::string(dtype_name(t)));
    CHECK(same_values(add(a.to(kGpu), b.to(kGpu)), add(a, b)));
    CHECK(same_values(mul(a.to(kGpu), b.to(kGpu)), mul(a, b)));
    CHECK(same_values(div(a.to(kGpu), b.to(kGpu)), div(a, b)));
    CHECK(same_values(maximum(a.to(kGpu), b.to(kGpu)), maximum(a, b)));
    CHECK(same_values(lt(a.to(kGpu), b.to(kGpu)), lt(a, b)));
  }
}

TEST_CASE("cuda: where and masked_fill") {
  GPU_CASE();
  for (DType t : kAllTypes) {
    INFO(std::string(dtype_name(t)));
    const Tensor c = gt(random_tensor({8, 1, 16}, 20, DType::f32), Tensor::scalar(0.0));
    const Tensor a = random_tensor({8, 5, 16}, 21, t), b = random_tensor({5, 1}, 22, t);
    CHECK(same_values(where(c.to(kGpu), a.to(kGpu), b.to(kGpu)), where(c, a, b)));
  }
  const Tensor x = random_tensor({4, 8, 8}, 23, DType::f32);
  const Tensor mask = gt(random_tensor({8, 8}, 24, DType::f32), Tensor::scalar(0.5));
  CHECK(same_values(masked_fill(x.to(kGpu), mask.to(kGpu), -INFINITY), masked_fill(x, mask, -INFINITY)));
}

// ---------------------------------------------------------------- reductions

TEST_CASE("cuda: sums over every layout, short and long rows") {
  GPU_CASE();
  // The long rows and columns take cuda/reduce.cu's two-pass plans (several parts a row past 4,096
  // elements, a column past 256 rows) on the emulator's 3 SMs and on an H100's 132 alike; a tenth
  // of the lengths they were (300,000) takes the same plans at a tenth of the emulator's time.
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{37, 53}, {1}},        {{37, 53}, {0}},       {{37, 53}, {}},         {{5, 6, 7}, {1}},
      {{5, 6, 7}, {0, 2}},    {{3, 12000}, {1}},     {{12000, 3}, {0}},      {{1, 30000}, {1}},
      {{2, 3, 4, 5}, {1, 3}}, {{30000, 1}, {0}},     {{64, 2048}, {1}},      {{4096, 64}, {0}},
  };
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    for (const auto& [shape, dims] : cases) {
      INFO(std::string(dtype_name(t)), " shape ", shape_str(shape), " dims ", dims.size());
      const Tensor x = random_tensor(shape, 30, t);
      const Tensor g = x.to(kGpu);
      if (is_floating(t)) {
        CHECK(nmse(sum(g, dims), sum(x, dims)) <= tolerance(t));
        CHECK(nmse(sum(g.transpose(0, 1), dims), sum(x.transpose(0, 1), dims)) <= tolerance(t));
      } else {
        CHECK(same_values(sum(g, dims), sum(x, dims)));
      }
      // Fixed trees: the same input gives the same bits every time.
      CHECK(same_values(sum(g, dims), sum(g, dims)));
    }
  }
}

TEST_CASE("cuda: max, min, argmax, argmin with ties and NaN") {
  GPU_CASE();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    for (const Shape& shape : {Shape{40, 77}, Shape{3, 9000}, Shape{9000, 3}, Shape{1, 20000}}) {
      INFO(std::string(dtype_name(t)), " shape ", shape_str(shape));
      // Few distinct values: many ties, so the first index must win.
      Tensor x = random_tensor(shape, 31, DType::f64);
      x = div(x.to(DType::i64).to(DType::f64), 1.0).to(t);
      if (is_floating(t))  // a NaN in some rows
        x = where(gt(random_tensor(shape, 32, DType::f32), Tensor::scalar(2.8)), Tensor::scalar(nan, t), x);
      const Tensor g = x.to(kGpu);
      for (int64_t dim : {0, 1}) {
        CHECK(same_values(max(g, dim), max(x, dim)));
        CHECK(same_values(argmax(g, dim), argmax(x, dim)));
        for (ReduceOp op : {ReduceOp::min, ReduceOp::argmin}) {
          Shape keep = shape;
          keep[size_t(dim)] = 1;
          const DType ot = op == ReduceOp::argmin ? DType::i64 : t;
          Tensor og = Tensor::empty(keep, ot, kGpu), oc = Tensor::empty(keep, ot);
          backend_for(kGpu).reduce(op, g, {dim}, og);
          backend_for(kCpu).reduce(op, x, {dim}, oc);
          CHECK(same_values(og, oc));
        }
      }
      CHECK(same_values(max(g), max(x)));
    }
  }
  // max's backward scatters the gradient to the argmax (scatter_add on the GPU).
  const Tensor x = random_tensor({6, 50}, 33, DType::f32);
  Tensor xg = x.to(kGpu);
  xg.requires_grad_();
  sum(mul(max(xg, 1), 2.0)).backward();
  const auto at = argmax(x, 1).to_vector<int64_t>();
  std::vector<float> want(300, 0.0f);
  for (size_t r = 0; r < 6; ++r) want[r * 50 + size_t(at[r])] = 2.0f;
  CHECK(same_values(xg.grad(), Tensor::from_vector(want, {6, 50})));
}

// ---------------------------------------------------------------- matmul

TEST_CASE("cuda: matmul through cuBLAS: layouts, batches, broadcasting, 16-bit") {
  GPU_CASE();
  struct Case {
    Shape a, b;
    bool ta, tb;  // operand given as a transposed view
  };
  const std::vector<Case> cases = {
      {{64, 48}, {48, 80}, false, false}, {{64, 48}, {48, 80}, true, false}, {{64, 48}, {48, 80}, false, true},
      {{64, 48}, {48, 80}, true, true},   {{7, 33, 17}, {17, 5}, false, false}, {{4, 1, 9, 16}, {3, 16, 11}, false, true},
      {{48}, {48, 80}, false, false},     {{64, 48}, {48}, false, false},    {{1, 48}, {48, 1}, false, false},
      {{2, 3, 5, 8}, {2, 3, 8, 4}, true, false},
  };
  for (DType t : kFloatTypes) {
    for (const auto& c : cases) {
      INFO(std::string(dtype_name(t)), " a ", shape_str(c.a), " b ", shape_str(c.b));
      auto make = [&](const Shape& s, bool trans, uint64_t seed) {
        if (!trans || s.size() < 2) return random_tensor(s, seed, t);
        Shape st = s;
        std::swap(st[st.size() - 1], st[st.size() - 2]);
        return random_tensor(st, seed, t).transpose(-1, -2);
      };
      const Tensor a = make(c.a, c.ta, 40), b = make(c.b, c.tb, 41);
      const Tensor ag = c.ta ? a.transpose(-1, -2).contiguous().to(kGpu).transpose(-1, -2) : a.to(kGpu);
      const Tensor bg = c.tb ? b.transpose(-1, -2).contiguous().to(kGpu).transpose(-1, -2) : b.to(kGpu);
      CHECK(nmse(matmul(ag, bg), matmul(a, b)) <= tolerance(t));
    }
    // A view that is neither row- nor column-major is copied first.
    const Tensor a = random_tensor({40, 60}, 42, t), b = random_tensor({30, 20}, 43, t);
    const Tensor as = a.slice(0, 0, 40, 2).slice(1, 0, 60, 2), bs = b.slice(0, 0, 30, 1);
    CHECK(nmse(matmul(a.to(kGpu).slice(0, 0, 40, 2).slice(1, 0, 60, 2), b.to(kGpu)), matmul(as, bs)) <= tolerance(t));
    // Empty inner dim: zeros.
    CHECK(same_values(matmul(Tensor::zeros({3, 0}, t, kGpu), Tensor::zeros({0, 4}, t, kGpu)),
                      Tensor::zeros({3, 4}, t)));
  }
  // Gradients through a batched product with a broadcast weight.
  const Tensor a = random_tensor({3, 16, 24}, 44, DType::f32), w = random_tensor({24, 8}, 45, DType::f32);
  Tensor ac = a.clone(), wc = w.clone(), ag = a.to(kGpu), wg = w.to(kGpu);
  for (Tensor* p : {&ac, &wc, &ag, &wg}) p->requires_grad_();
  sum(square(matmul(ac, wc))).backward();
  sum(square(matmul(ag, wg))).backward();
  CHECK(nmse(ag.grad(), ac.grad()) <= 1e-7);
  CHECK(nmse(wg.grad(), wc.grad()) <= 1e-7);
}

// ---------------------------------------------------------------- nn kernels

TEST_CASE("cuda: softmax and log_softmax, forward and backward") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    // Rows longer than a block's 1,024 threads ({3, 12000}), and, along dim 0, 12,000 rows of 3.
    for (const Shape& shape : {Shape{7, 1000}, Shape{3, 12000}, Shape{64, 5}, Shape{4, 33, 17}}) {
      for (bool log : {false, true}) {
        for (int64_t dim : {int64_t(-1), int64_t(0)}) {
          INFO(std::string(dtype_name(t)), " shape ", shape_str(shape), std::string(log ? " log_softmax" : " softmax"), " dim ", dim);
          Tensor x = random_tensor(shape, 50, t, 3.0);
          if (dim == -1)  // masked entries, as causal attention makes them
            x = masked_fill(x, gt(random_tensor(shape, 51, DType::f32), Tensor::scalar(1.0)), -INFINITY);
          const Tensor w = random_tensor(shape, 52, t);
          Tensor xc = x.clone(), xg = x.to(kGpu);
          xc.requires_grad_();
          xg.requires_grad_();
          const Tensor yc = log ? log_softmax(xc, dim) : softmax(xc, dim);
          const Tensor yg = log ? log_softmax(xg, dim) : softmax(xg, dim);
          CHECK(nmse(yg, yc) <= tolerance(t));
          // d/dy of sum(w * y) is w, finite even where y is -inf.
          sum(mul(yc, w)).backward();
          sum(mul(yg, w.to(kGpu))).backward();
          CHECK(nmse(xg.grad(), xc.grad()) <= tolerance(t));
        }
      }
    }
  }
}

// ---- causal attention (cuda/attention.cu) against the CPU's fused kernel in f64

namespace {

// q [B, H, Tq, hs] against k, v [B, H, Tk, hs] (Tk > Tq: queries after a KV cache's keys). With
// `qkv`, q, k and v are head views of one [B, T, 3C] projection, as the model makes them.
struct AttnCase {
  int64_t B, H, Tq, Tk, hs;
  bool qkv = false;
};

std::string attn_str(const AttnCase& c) {
  return "B " + std::to_string(c.B) + " H " + std::to_string(c.H) + " Tq " + std::to_string(c.Tq) + " Tk " +
         std::to_string(c.Tk) + " hs " + std::to_string(c.hs) + (c.qkv ? " (qkv views)" : "");
}

// The case's leaves (one [B, T, 3C] projection, or q, k and v) and q, k, v made from them.
struct AttnInputs {
  std::vector<Tensor> leaves;
  Tensor q, k, v;
};

AttnInputs attn_inputs(const AttnCase& c, const std::vector<Tensor>& values, Device device, DType dtype) {
  AttnInputs in;
  for (const Tensor& x : values) in.leaves.push_back(x.to(dtype).to(device).requires_grad_(true));
  if (c.qkv) {
    const int64_t C = c.H * c.hs;
    auto head = [&](int64_t i) {
      return in.leaves[0].narrow(2, i * C, C).view({c.B, c.Tq, c.H, c.hs}).transpose(1, 2);
    };
    in.q = head(0), in.k = head(1), in.v = head(2);
  } else {
    in.q = in.leaves[0], in.k = in.leaves[1], in.v = in.leaves[2];
  }
  return in;
}

// The forward output and the leaves' gradients of sum(out * gout).
std::vector<Tensor> attn_run(const AttnCase& c, const std::vector<Tensor>& values, const Tensor& gout, Device device,
                             DType dtype) {
  AttnInputs in = attn_inputs(c, values, device, dtype);
  const Tensor out = causal_attention(in.q, in.k, in.v, 1.0 / std::sqrt(double(c.hs)));
  sum(mul(out, gout.to(dtype).to(device))).backward();
  std::vector<Tensor> r{out};
  for (const Tensor& l : in.leaves) r.push_back(l.grad());
  return r;
}

// Within `nmse_tol` in normalised squared error and, element by element, within `elem_tol` of the
// reference's largest magnitude (a single wrong element shows there when the sum hides it). The
// inputs are N(0, 1), so every result's scale is at least 0.1 but where it is zero by
// cancellation (q's and k's gradients when a query sees one key: its softmax is 1 whatever the
// scores); the scale is floored there, so that rounding error is not measured against zero.
void check_attn(const Tensor& got, const Tensor& want, double nmse_tol, double elem_tol, const char* what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const auto g = host_values(got), w = host_values(want);
  constexpr double kFloor = 0.1;
  double largest = kFloor, worst = 0, err2 = 0, want2 = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    largest = std::max(largest, std::abs(w[i]));
    worst = std::max(worst, std::isnan(g[i]) ? INFINITY : std::abs(g[i] - w[i]));
    err2 += (g[i] - w[i]) * (g[i] - w[i]);
    want2 += w[i] * w[i];
  }
  const double e = err2 / std::max(want2, double(w.size()) * kFloor * kFloor);
  CHECK_MESSAGE(e <= nmse_tol, "nmse ", e);
  CHECK_MESSAGE(worst <= elem_tol * largest, "largest error ", worst, " against ", largest);
}

// The attention backward (core/backend.h) for a scope; the default after it.
struct AttentionBackwardScope {
  explicit AttentionBackwardScope(AttentionBackward how) { set_attention_backward(how); }
  ~AttentionBackwardScope() { set_attention_backward(AttentionBackward::split); }
  AttentionBackwardScope(const AttentionBackwardScope&) = delete;
  AttentionBackwardScope& operator=(const AttentionBackwardScope&) = delete;
};

}  // namespace

TEST_CASE("cuda: causal attention forward and backward against the f64 CPU reference") {
  GPU_CASE();
  // Decode (at most 16 queries) and flash shapes: one query, a few, tiles of 64 with a ragged end
  // (70, 2 tiles + 1 = 129), every head size of the kernels (32, 64, 128) and some padded ones
  // (24, 40; 20, which 16-bit rows do not fill in whole 16-byte vectors), batches and heads, the
  // model's strided views of one projection, and queries after a KV cache's keys.
  const std::vector<AttnCase> cases = {
      {1, 1, 1, 1, 64},     {2, 3, 7, 7, 32},     {1, 1, 1, 77, 64},  {2, 2, 3, 40, 20},
      {1, 2, 70, 70, 64},   {2, 1, 129, 129, 32}, {1, 1, 80, 80, 128}, {1, 2, 33, 33, 24},
      {2, 2, 40, 40, 40, true}, {1, 2, 20, 90, 64}, {1, 1, 17, 17, 64, true},
  };
  // Tolerances. f32: the CPU sums in another order and its exp is not exp2f's (a few ulp per
  // term). 16-bit: P and dS round to the input type as tensor-core operands (a relative 2^-9 for
  // bf16, 2^-12 for f16, per term of their products), and each result rounds once more, so
  // single elements stay within a few of those steps of the largest value and the normalised
  // squared error around their square. Both backwards (split and atomic) meet the same bounds:
  // they round the same operands and differ only in the order of dQ's f32 sums.
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const double nmse_tol = t == DType::f32 ? 1e-10 : t == DType::bf16 ? 3e-5 : 1e-6;
    const double elem_tol = t == DType::f32 ? 1e-5 : t == DType::bf16 ? 1.0 / 64 : 1.0 / 512;
    for (const AttnCase& c : cases) {
      const uint64_t seed = uint64_t(c.B * 1000 + c.Tq * 10 + c.hs);
      std::vector<Tensor> values;
      if (c.qkv) values.push_back(random_tensor({c.B, c.Tq, 3 * c.H * c.hs}, seed, t));
      else
        for (int64_t i = 0; i < 3; ++i)
          values.push_back(random_tensor({c.B, c.H, i ? c.Tk : c.Tq, c.hs}, seed + uint64_t(i), t));
      const Tensor gout = random_tensor({c.B, c.H, c.Tq, c.hs}, seed + 7, t);
      const std::vector<Tensor> want = attn_run(c, values, gout, kCpu, DType::f64);
      for (AttentionBackward how : {AttentionBackward::split, AttentionBackward::atomic}) {
        const AttentionBackwardScope scope(how);
        INFO(std::string(attention_backward_name(how)), " backward, ", std::string(dtype_name(t)), " ",
             attn_str(c));
        const std::vector<Tensor> got = attn_run(c, values, gout, kGpu, t);
        CHECK(got[0].dtype() == t);
        check_attn(got[0], want[0], nmse_tol, elem_tol, "out");
        for (size_t i = 1; i < got.size(); ++i) {
          CHECK(got[i].dtype() == t);
          const char* what = c.qkv ? "grad qkv" : i == 1 ? "grad q" : i == 2 ? "grad k" : "grad v";
          check_attn(got[i], want[i], nmse_tol, elem_tol, what);
        }
      }
    }
  }
}

TEST_CASE("cuda: causal attention keeps no [B, H, T, T] tensor, forward or backward") {
  GPU_CASE();
  // One head of T = 512 in bf16: its scores would take 512 KiB (1 MiB in f32, as softmax takes
  // them). The fused op's forward and backward allocate q-sized tensors (out, gout, the three
  // gradients, 32 KiB each), lse and rowsums (2 KiB each): all of them stay under one score matrix.
  constexpr int64_t T = 512, hs = 32;
  const size_t scores_bytes = size_t(T * T) * 2;
  std::vector<Tensor> x;
  for (uint64_t i = 0; i < 3; ++i) x.push_back(random_tensor({1, 1, T, hs}, 70 + i, DType::bf16).to(kGpu));
  const Tensor gout = random_tensor({1, 1, T, hs}, 73, DType::bf16).to(kGpu);
  for (Tensor& t : x) t.requires_grad_(true);
  backend_for(kGpu).synchronize(0);
  const size_t before = memory_stats(kGpu).allocated;
  reset_peak_memory(kGpu);
  {
    const Tensor out = causal_attention(x[0], x[1], x[2], 0.125);
    out.backward(gout);
    backend_for(kGpu).synchronize(0);
  }
  const size_t peak = memory_stats(kGpu).peak_allocated - before;
  CHECK_MESSAGE(peak < scores_bytes, "peak ", peak, " bytes over the inputs, against ", scores_bytes, " of scores");
}

TEST_CASE("cuda: greedy generation with the KV cache on cuda gives the tokens of the CPU and of no cache") {
  GPU_CASE();
  // Head size 32: the prompt's queries and each new one run the decode kernel after the cached
  // keys (nn/attention.cpp), the uncached path the same kernel over the whole window. 12 new
  // tokens overflow block_size 16, so the cache also starts over from a cropped window.
  nn::GPTConfig c;
  c.vocab_size = 29, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 64;
  nn::GPT cpu_model(c, 5), gpu_model(c, 5);
  gpu_model.to(kGpu);
  const Tensor prompt = Tensor::from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  const std::vector<int64_t> want = cpu_model.generate(prompt, 12, 0.0).to_vector<int64_t>();
  CHECK(gpu_model.generate(prompt.to(kGpu), 12, 0.0).to(kCpu).to_vector<int64_t>() == want);
  CHECK(gpu_model.generate_nocache(prompt.to(kGpu), 12, 0.0).to(kCpu).to_vector<int64_t>() == want);
}

TEST_CASE("cuda: causal attention is deterministic, and the model's fused op takes one qkv projection") {
  GPU_CASE();
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(std::string(dtype_name(t)));
    const Tensor qkv = random_tensor({2, 70, 3 * 2 * 32}, 90, t);
    const Tensor w = random_tensor({2, 70, 64}, 91, t).to(kGpu);
    auto run = [&] {
      Tensor x = qkv.to(kGpu).requires_grad_(true);
      const Tensor y = causal_attention_qkv(x, 2, 0.25);
      sum(mul(y, w)).backward();
      return std::vector<Tensor>{y, x.grad()};
    };
    const std::vector<Tensor> a = run(), b = run();
    CHECK(same_values(a[0], b[0]));
    CHECK(same_values(a[1], b[1]));
    // causal_attention_qkv is causal_attention on the head views, bit for bit.
    Tensor x = qkv.to(kGpu).requires_grad_(true);
    auto head = [&](int64_t i) { return x.narrow(2, i * 64, 64).view({2, 70, 2, 32}).transpose(1, 2); };
    const Tensor y = causal_attention(head(0), head(1), head(2), 0.25).transpose(1, 2).reshape({2, 70, 64});
    sum(mul(y, w)).backward();
    CHECK(same_values(y, a[0]));
    CHECK(same_values(x.grad(), a[1]));
  }
}

TEST_CASE("cuda: layer_norm forward and backward, with and without affine, deterministic") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    for (const Shape& shape : {Shape{300, 768}, Shape{5, 7, 33}, Shape{2, 5000}}) {
      for (bool affine : {true, false}) {
        INFO(std::string(dtype_name(t)), " shape ", shape_str(shape), std::string(affine ? " affine" : " plain"));
        const int64_t D = shape.back();
        const Tensor x = add(random_tensor(shape, 60, t, 2.0), 0.5), gy = random_tensor(shape, 61, t);
        const Tensor w = affine ? add(random_tensor({D}, 62, t, 0.1), 1.0) : Tensor();
        const Tensor b = affine ? random_tensor({D}, 63, t, 0.1) : Tensor();
        auto run = [&](Device d) {
          Tensor xd = x.to(d).detach(), wd = affine ? w.to(d).detach() : Tensor(), bd = affine ? b.to(d).detach() : Tensor();
          xd.requires_grad_();
          if (affine) {
            wd.requires_grad_();
            bd.requires_grad_();
          }
          const Tensor y = layer_norm(xd, wd, bd, 1e-5);
          sum(mul(y, gy.to(d))).backward();
          return std::vector<Tensor>{y, xd.grad(), affine ? wd.grad() : Tensor(), affine ? bd.grad() : Tensor()};
        };
        const auto c = run(kCpu), g = run(kGpu), g2 = run(kGpu);
        const char* names[] = {"out", "grad x", "grad weight", "grad bias"};
        for (size_t i = 0; i < c.size(); ++i) {
          if (!c[i].defined()) continue;
          INFO(std::string(names[i]));
          CHECK(nmse(g[i], c[i]) <= tolerance(t));
          CHECK(same_values(g[i], g2[i]));
        }
      }
    }
  }
}

TEST_CASE("cuda: rms_norm forward and backward, with and without weight, deterministic") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    for (const Shape& shape : {Shape{300, 768}, Shape{5, 7, 33}, Shape{2, 5000}, Shape{64, 8}}) {
      for (bool weighted : {true, false}) {
        INFO(std::string(dtype_name(t)), " shape ", shape_str(shape), std::string(weighted ? " weight" : " plain"));
        const int64_t D = shape.back();
        const Tensor x = add(random_tensor(shape, 70, t, 2.0), 0.5), gy = random_tensor(shape, 71, t);
        const Tensor w = weighted ? add(random_tensor({D}, 72, t, 0.1), 1.0) : Tensor();
        auto run = [&](Device d) {
          Tensor xd = x.to(d).detach(), wd = weighted ? w.to(d).detach() : Tensor();
          xd.requires_grad_();
          if (weighted) wd.requires_grad_();
          const Tensor y = rms_norm(xd, wd, 1e-5);
          sum(mul(y, gy.to(d))).backward();
          return std::vector<Tensor>{y, xd.grad(), weighted ? wd.grad() : Tensor()};
        };
        const auto c = run(kCpu), g = run(kGpu), g2 = run(kGpu);
        const char* names[] = {"out", "grad x", "grad weight"};
        for (size_t i = 0; i < c.size(); ++i) {
          if (!c[i].defined()) continue;
          INFO(std::string(names[i]));
          CHECK(nmse(g[i], c[i]) <= tolerance(t));
          CHECK(same_values(g[i], g2[i]));
        }
      }
    }
  }
}

TEST_CASE("cuda: add_layer_norm and add_rms_norm bitwise the add and the norm apart, and the CPU's within tolerance") {
  GPU_CASE();
  for (const testing::ResidualNormCase& c : testing::residual_norm_cases()) {
    const std::vector<Tensor> g = testing::check_residual_norm(c, kGpu, 11);
    const std::vector<Tensor> want = testing::check_residual_norm(c, kCpu, 11);
    const char* names[] = {"sum", "normed", "grad x", "grad branch", "grad weight", "grad bias"};
    for (size_t i = 0; i < g.size(); ++i) {
      if (!g[i].defined() || g[i].numel() == 0) continue;
      INFO(testing::describe(c), ": ", std::string(names[i]));
      CHECK(nmse(g[i], want[i]) <= tolerance(g[i].dtype()));
    }
  }
}

TEST_CASE("cuda: the norms read rows 16 bytes at a time where aligned, one element at a time where not") {
  GPU_CASE();
  // Rows of 64 elements: packed from an aligned start, element by element from a start one element
  // in (a contiguous view whose storage is offset); both match the CPU.
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (int64_t offset : {0, 1}) {
      INFO(std::string(dtype_name(t)), " offset ", offset);
      const Tensor base = random_tensor({6 * 64 + 1}, 131, t, 2.0), gy = random_tensor({6, 64}, 132, t);
      const Tensor w = add(random_tensor({64}, 133, t, 0.1), 1.0);
      auto run = [&](Device d) {
        Tensor xd = base.to(d).narrow(0, offset, 6 * 64).view({6, 64}).detach().requires_grad_(true);
        const Tensor y = layer_norm(xd, w.to(d), Tensor(), 1e-5), z = rms_norm(xd, w.to(d), 1e-5);
        sum(mul(add(y, z), gy.to(d))).backward();
        return std::vector<Tensor>{y, z, xd.grad()};
      };
      const auto c = run(kCpu), g = run(kGpu);
      for (size_t i = 0; i < c.size(); ++i) CHECK(nmse(g[i], c[i]) <= tolerance(t));
    }
  }
}

TEST_CASE("cuda: rope forward and backward on contiguous and strided heads, every float dtype") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    // [B, H, T, D] contiguous, and q as attention takes it: a [B, T, H, D] projection's transpose.
    for (bool strided : {false, true}) {
      INFO(std::string(dtype_name(t)), std::string(strided ? " strided" : " contiguous"));
      const int64_t B = 2, H = 3, T = 37, D = 64;
      const Tensor x = strided ? random_tensor({B, T, H, D}, 80, t).transpose(1, 2) : random_tensor({B, H, T, D}, 80, t);
      const Tensor gy = random_tensor({B, H, T, D}, 81, t);
      const DType table = t == DType::f64 ? DType::f64 : DType::f32;
      const Tensor cos = random_tensor({T, D / 2}, 82, table), sin = random_tensor({T, D / 2}, 83, table);
      auto run = [&](Device d) {
        Tensor xd = x.to(d).detach();
        xd.requires_grad_();
        const Tensor y = rope(xd, cos.to(d), sin.to(d));
        sum(mul(y, gy.to(d))).backward();
        return std::vector<Tensor>{y, xd.grad()};
      };
      const auto c = run(kCpu), g = run(kGpu);
      CHECK(g[0].strides() == c[0].strides());  // [B, T, H, D] storage on both
      CHECK(nmse(g[0], c[0]) <= tolerance(t));
      CHECK(nmse(g[1], c[1]) <= tolerance(t));
    }
  }
}

TEST_CASE("cuda: squared_relu and softcap, forward and backward") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    INFO(std::string(dtype_name(t)));
    const Tensor x = random_tensor({1000, 37}, 90, t, 4.0), gy = random_tensor({1000, 37}, 91, t);
    auto run = [&](Device d) {
      Tensor a = x.to(d).detach(), b = x.to(d).detach();
      a.requires_grad_();
      b.requires_grad_();
      const Tensor ya = squared_relu(a), yb = softcap(b, 3.0);
      sum(add(mul(ya, gy.to(d)), mul(yb, gy.to(d)))).backward();
      return std::vector<Tensor>{ya, yb, a.grad(), b.grad()};
    };
    const auto c = run(kCpu), g = run(kGpu);
    for (size_t i = 0; i < c.size(); ++i) {
      INFO(i);
      CHECK(nmse(g[i], c[i]) <= tolerance(t));
    }
  }
}

TEST_CASE("cuda: embedding forward and deterministic backward, small and large buckets") {
  GPU_CASE();
  // 5000 ids: id 7 three thousand times (a bucket the kernel rebuilds by scanning), the rest random.
  std::vector<int64_t> ids(5000);
  const auto r = Tensor::randint(0, 50, {5000}, 70).to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i % 5 < 3 ? 7 : r[i];
  for (DType t : kFloatTypes) {
    for (int64_t C : {int64_t(33), int64_t(64), int64_t(1100)}) {
      // Rows wider than a block's 1,024 columns a pass (C = 1100) with i64 ids; i32 ids read the
      // same way at every width.
      for (DType it : C > 1024 ? std::vector<DType>{DType::i64} : std::vector<DType>{DType::i64, DType::i32}) {
        INFO(std::string(dtype_name(t)), " dim ", C, " ids ", std::string(dtype_name(it)));
        const Tensor idx = Tensor::from_vector(ids, {50, 100}).to(it);
        const Tensor w = random_tensor({50, C}, 71, t), gy = random_tensor({50, 100, C}, 72, t);
        auto run = [&](Device d) {
          Tensor wd = w.to(d).detach();
          wd.requires_grad_();
          const Tensor y = embedding(wd, idx.to(d));
          sum(mul(y, gy.to(d))).backward();
          return std::pair{y, wd.grad()};
        };
        const auto [yc, gc] = run(kCpu);
        const auto [yg, gg] = run(kGpu);
        CHECK(same_values(yg, yc));
        // Each row sums its positions in increasing order on both backends: the same bits.
        if (t == DType::f32 || t == DType::f64) CHECK(same_values(gg, gc));
        else CHECK(nmse(gg, gc) <= tolerance(t));
        CHECK(same_values(run(kGpu).second, gg));
      }
    }
  }
}

TEST_CASE("cuda: cross_entropy forward and backward with ignore_index") {
  GPU_CASE();
  for (DType t : kFloatTypes) {
    for (int64_t V : {int64_t(10), int64_t(1000), int64_t(50257)}) {
      INFO(std::string(dtype_name(t)), " classes ", V);
      const int64_t N = V > 10000 ? 8 : 64;
      const Tensor logits = random_tensor({N, V}, 80, t, 3.0);
      auto tv = Tensor::randint(0, V, {N}, 81).to_vector<int64_t>();
      for (size_t i = 0; i < tv.size(); i += 5) tv[i] = -100;
      const Tensor targets = Tensor::from_vector(tv, {N});
      auto run = [&](Device d) {
        Tensor x = logits.to(d).detach();
        x.requires_grad_();
        const Tensor loss = cross_entropy(x, targets.to(d));
        mul(loss, 3.0).backward();
        return std::pair{loss, x.grad()};
      };
      const auto [lc, gc] = run(kCpu);
      const auto [lg, gg] = run(kGpu);
      CHECK(nmse(lg, lc) <= tolerance(t));
      CHECK(nmse(gg, gc) <= tolerance(t));
    }
  }
}

// ---------------------------------------------------------------- indexing (against plain loops)

TEST_CASE("cuda: index_select, index_add, gather, scatter_add") {
  GPU_CASE();
  Backend& gpu = backend_for(kGpu);
  const Tensor x = random_tensor({5, 7, 3}, 90, DType::f32);
  const auto xv = x.to_vector<float>();
  {  // index_select along dim 1
    const std::vector<int32_t> iv = {6, 0, 0, 3};
    Tensor out = Tensor::empty({5, 4, 3}, DType::f32, kGpu);
    gpu.index_select(x.to(kGpu), 1, Tensor::from_vector(iv, {4}, kGpu), out);
    std::vector<float> want;
    for (int o = 0; o < 5; ++o)
      for (int32_t j : iv)
        for (int i = 0; i < 3; ++i) want.push_back(xv[size_t((o * 7 + j) * 3 + i)]);
    CHECK(same_values(out, Tensor::from_vector(want, {5, 4, 3})));
  }
  {  // index_add along dim 1, repeated indices summed in order
    const std::vector<int64_t> iv = {1, 6, 1, 1};
    const Tensor src = random_tensor({5, 4, 3}, 91, DType::f32);
    const auto sv = src.to_vector<float>();
    Tensor out = x.to(kGpu);
    gpu.index_add(out, 1, Tensor::from_vector(iv, {4}, kGpu), src.to(kGpu));
    std::vector<float> want = xv;
    for (int o = 0; o < 5; ++o)
      for (size_t j = 0; j < iv.size(); ++j)
        for (int i = 0; i < 3; ++i) want[size_t((o * 7 + iv[j]) * 3 + i)] += sv[size_t((o * 4 + int(j)) * 3 + i)];
    CHECK(same_values(out, Tensor::from_vector(want, {5, 7, 3})));
  }
  const Tensor m = random_tensor({4, 6}, 92, DType::f32);
  const auto mv = m.to_vector<float>();
  const std::vector<int64_t> gi = {5, 0, 2, 2, 1, 1, 3, 4, 0, 5, 5, 5};
  {  // gather along dim 1 (and from a transposed view)
    Tensor out = Tensor::empty({4, 3}, DType::f32, kGpu);
    gpu.gather(m.to(kGpu), 1, Tensor::from_vector(gi, {4, 3}, kGpu), out);
    std::vector<float> want;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c) want.push_back(mv[size_t(r * 6 + gi[size_t(r * 3 + c)])]);
    CHECK(same_values(out, Tensor::from_vector(want, {4, 3})));
    Tensor out_t = Tensor::empty({3, 4}, DType::f32, kGpu);
    const std::vector<int64_t> gt_idx = {0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 1, 1};
    gpu.gather(m.to(kGpu).t(), 1, Tensor::from_vector(gt_idx, {3, 4}, kGpu), out_t);
    std::vector<float> want_t;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c) want_t.push_back(mv[size_t(gt_idx[size_t(r * 4 + c)] * 6 + r)]);
    CHECK(same_values(out_t, Tensor::from_vector(want_t, {3, 4})));
  }
  {  // scatter_add along dim 1, collisions summed in order
    const Tensor src = random_tensor({4, 3}, 93, DType::f32);
    const auto sv = src.to_vector<float>();
    Tensor out = m.to(kGpu);
    gpu.scatter_add(out, 1, Tensor::from_vector(gi, {4, 3}, kGpu), src.to(kGpu));
    std::vector<float> want = mv;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c) want[size_t(r * 6 + gi[size_t(r * 3 + c)])] += sv[size_t(r * 3 + c)];
    CHECK(same_values(out, Tensor::from_vector(want, {4, 6})));
  }
}

TEST_CASE("cuda: ids and indices out of range are errors, reported at the next sync") {
  GPU_CASE();
  const Tensor w = random_tensor({10, 4}, 95, DType::f32).to(kGpu);
  const Tensor bad = Tensor::from_vector<int64_t>({1, 2, 10, 3}, {4}, kGpu);
  const Tensor y = embedding(w, bad);
  CHECK_THROWS_WITH_AS(y.to(kCpu), doctest::Contains("embedding: id 10 at flat position 2 is out of range [0, 10)"),
                       Error);
  CHECK(same_values(Tensor::ones({3}, DType::f32, kGpu), Tensor::ones({3})));  // the flag was cleared

  const Tensor logits = random_tensor({3, 5}, 96, DType::f32).to(kGpu);
  const Tensor loss = cross_entropy(logits, Tensor::from_vector<int64_t>({0, -100, 7}, {3}, kGpu));
  CHECK_THROWS_WITH_AS(loss.item(), doctest::Contains("cross_entropy: target 7"), Error);

  Tensor out = Tensor::empty({2}, DType::f32, kGpu);
  backend_for(kGpu).index_select(w.select(1, 0), 0, Tensor::from_vector<int32_t>({0, -1}, {2}, kGpu), out);
  CHECK_THROWS_WITH_AS(backend_for(kGpu).synchronize(0), doctest::Contains("index_select: index -1"), Error);
  CHECK_NOTHROW(backend_for(kGpu).synchronize(0));
}

// ---------------------------------------------------------------- optimizer

namespace {
// PyTorch's single-tensor Adam/AdamW, element by element in f64.
void adam_reference(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                    std::vector<double>& v, std::vector<double>& vmax, double step, const AdamParams& a) {
  const double bc1 = 1 - std::pow(a.beta1, step), bc2 = 1 - std::pow(a.beta2, step);
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = a.maximize ? -g[i] : g[i];
    if (a.weight_decay != 0) {
      if (a.decoupled_weight_decay) p[i] *= 1 - a.lr * a.weight_decay;
      else gi += a.weight_decay * p[i];
    }
    m[i] += (1 - a.beta1) * (gi - m[i]);
    v[i] = v[i] * a.beta2 + (1 - a.beta2) * gi * gi;
    double vh = v[i];
    if (a.amsgrad) vh = vmax[i] = std::max(vmax[i], v[i]);
    p[i] -= a.lr / bc1 * (m[i] / (std::sqrt(vh) / std::sqrt(bc2) + a.eps));
  }
}
}  // namespace

TEST_CASE("cuda: adam_update matches the CPU kernel and PyTorch's Adam and AdamW") {
  GPU_CASE();
  std::vector<AdamParams> variants(4);
  variants[1].weight_decay = 0.1;
  variants[2].weight_decay = 0.1;
  variants[2].decoupled_weight_decay = true;
  variants[3].amsgrad = true;
  variants[3].maximize = true;
  const std::vector<std::pair<DType, DType>> types = {
      {DType::f32, DType::f32}, {DType::f64, DType::f64}, {DType::bf16, DType::f32}, {DType::f16, DType::f16}};
  for (const AdamParams& a : variants) {
    for (const auto& [t, st] : types) {
      INFO(std::string(dtype_name(t)), " moments ", std::string(dtype_name(st)), " wd ", a.weight_decay,
           std::string(a.decoupled_weight_decay ? " decoupled" : ""), std::string(a.amsgrad ? " amsgrad" : ""));
      const int64_t n = 1000;
      Tensor p = random_tensor({n}, 100, t).to(kGpu);
      Tensor m = Tensor::zeros({n}, st, kGpu), v = Tensor::zeros({n}, st, kGpu), vm = Tensor::zeros({n}, st, kGpu);
      Tensor pc = p.to(kCpu), mc = Tensor::zeros({n}, st), vc = Tensor::zeros({n}, st), vmc = Tensor::zeros({n}, st);
      std::vector<double> rp = host_values(p);
      std::vector<double> rm(static_cast<size_t>(n)), rv(static_cast<size_t>(n)), rvm(static_cast<size_t>(n));
      for (int step = 1; step <= 3; ++step) {
        const Tensor g = random_tensor({n}, 100 + uint64_t(step), t);
        backend_for(kGpu).adam_update(p, g.to(kGpu), m, v, a.amsgrad ? vm : Tensor(), double(step), a);
        backend_for(kCpu).adam_update(pc, g, mc, vc, a.amsgrad ? vmc : Tensor(), double(step), a);
        adam_reference(rp, host_values(g), rm, rv, rvm, double(step), a);
      }
      // The same operations in the same order; only fused multiply-adds may differ.
      const double tol = t == DType::f64 ? 1e-24 : t == DType::f32 ? 1e-12 : tolerance(t);
      CHECK(nmse(p, pc) <= tol);
      CHECK(nmse(m, mc) <= (st == DType::f64 ? 1e-24 : st == DType::f32 ? 1e-12 : tolerance(st)));
      CHECK(nmse(v, vc) <= (st == DType::f64 ? 1e-24 : st == DType::f32 ? 1e-12 : tolerance(st)));
      if (t == DType::f32 || t == DType::f64)
        CHECK(nmse(p, Tensor::from_vector(rp, {n})) <= (t == DType::f32 ? 1e-12 : 1e-24));
    }
  }
}

TEST_CASE("cuda: fused adam_update_multi keeps step counters on the GPU and matches the CPU") {
  GPU_CASE();
  AdamParams a;
  a.lr = 1e-2;
  a.weight_decay = 0.05;
  a.decoupled_weight_decay = true;
  const std::vector<std::pair<int64_t, DType>> specs = {
      {1, DType::f32}, {5000, DType::f32}, {20000, DType::bf16}, {9, DType::f32}, {70000, DType::f32}};
  std::vector<Tensor> pc, gc, mc, vc, sc, pg, gg, mg, vg, sg, copies;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto [n, t] = specs[i];
    pc.push_back(random_tensor({n}, 200 + i, t));
    gc.push_back(random_tensor({n}, 300 + i, t));
    mc.push_back(Tensor::zeros({n}));
    vc.push_back(Tensor::zeros({n}));
    sc.push_back(Tensor::zeros({1}));
    pg.push_back(pc.back().to(kGpu));
    gg.push_back(gc.back().to(kGpu));
    mg.push_back(Tensor::zeros({n}, DType::f32, kGpu));
    vg.push_back(Tensor::zeros({n}, DType::f32, kGpu));
    sg.push_back(Tensor::zeros({1}, DType::f32, kGpu));
    // The f32 parameters' 16-bit copies (bf16 and f16 by turns), written by the same pass.
    copies.push_back(t == DType::f32 ? Tensor::empty({n}, i % 2 ? DType::f16 : DType::bf16, kGpu) : Tensor());
  }
  backend_for(kGpu).synchronize(0);
  reset_transfer_stats();
  for (int step = 0; step < 3; ++step) {
    backend_for(kGpu).adam_update_multi(pg, gg, mg, vg, {}, sg, a, copies);
    backend_for(kCpu).adam_update_multi(pc, gc, mc, vc, {}, sc, a, std::vector<Tensor>(specs.size()));
  }
  CHECK(transfer_stats() == TransferStats{});  // the fused step never talks to the host
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO("parameter ", i);
    CHECK(sg[i].item() == 3.0);
    // The bias corrections come from the GPU's pow; the rest is the CPU's arithmetic.
    CHECK(nmse(pg[i], pc[i]) <= (specs[i].second == DType::f32 ? 1e-12 : 1e-5));
    CHECK(nmse(mg[i], mc[i]) <= 1e-12);
    // Each copy is its parameter as stored, rounded once to nearest even.
    if (copies[i].defined()) CHECK(host_values(copies[i]) == host_values(pg[i].to(copies[i].dtype())));
  }
  // The fused and the plain GPU paths agree.
  Tensor p1 = random_tensor({5000}, 201, DType::f32).to(kGpu);
  Tensor m1 = Tensor::zeros({5000}, DType::f32, kGpu), v1 = Tensor::zeros({5000}, DType::f32, kGpu);
  for (int step = 1; step <= 3; ++step) backend_for(kGpu).adam_update(p1, gg[1], m1, v1, Tensor(), double(step), a);
  CHECK(nmse(p1, pg[1]) <= 1e-12);
}

// ---------------------------------------------------------------- memory and transfers

TEST_CASE("cuda: caching allocator statistics, reuse and empty_cache") {
  GPU_CASE();
  Allocator& al = allocator_for(kGpu);
  al.empty_cache();
  const MemoryStats s0 = memory_stats(kGpu);
  void* first = nullptr;
  {
    const Tensor a = Tensor::empty({1000}, DType::f32, kGpu);  // 4000 bytes -> one 4096-byte block
    const MemoryStats s1 = memory_stats(kGpu);
    CHECK(s1.allocated == s0.allocated + 4096);
    CHECK(s1.num_allocs == s0.num_allocs + 1);
    CHECK(s1.reserved >= s1.allocated);
    CHECK(s1.peak_allocated >= s1.allocated);
    first = a.data_ptr();
  }
  const MemoryStats s2 = memory_stats(kGpu);
  CHECK(s2.allocated == s0.allocated);
  CHECK(s2.reserved > s0.reserved);  // the segment stays cached
  {
    const Tensor b = Tensor::empty({1000}, DType::f32, kGpu);
    CHECK(b.data_ptr() == first);  // the freed block is handed out again
    CHECK(memory_stats(kGpu).reserved == s2.reserved);
  }
  reset_peak_memory(kGpu);
  {
    const Tensor big = Tensor::empty({(int64_t(4) << 20) / 4}, DType::f32, kGpu);  // 4 MiB: the large pool
    CHECK(memory_stats(kGpu).allocated == s0.allocated + (size_t(4) << 20));
    CHECK(memory_stats(kGpu).peak_allocated == s0.allocated + (size_t(4) << 20));
  }
  CHECK(memory_stats(kGpu).peak_allocated == s0.allocated + (size_t(4) << 20));
  al.empty_cache();
  CHECK(memory_stats(kGpu).reserved <= s2.reserved);
  CHECK(memory_stats(kGpu).allocated == s0.allocated);
}

TEST_CASE("cuda: running out of memory is an error with the sizes, and the device keeps working") {
  GPU_CASE();
  const int64_t n = int64_t(1) << 42;  // 16 TiB of f32
  CHECK_THROWS_WITH_AS(Tensor::empty({n}, DType::f32, kGpu),
                       doctest::Contains("cuda:0 out of memory: requested 17592186044416 bytes, free "), Error);
  CHECK_THROWS_WITH_AS(Tensor::empty({n}, DType::f32, kGpu), doctest::Contains(" of total "), Error);
  CHECK(same_values(add(Tensor::ones({5}, DType::f32, kGpu), 1.0), Tensor::full({5}, 2.0)));
}

TEST_CASE("cuda: host-device copies and syncs are counted once") {
  GPU_CASE();
  const Tensor h = Tensor::ones({256});
  backend_for(kGpu).synchronize(0);
  reset_transfer_stats();
  const Tensor g = h.to(kGpu);
  const Tensor y = add(mul(g, 2.0), g);  // kernels move nothing across
  TransferStats s = transfer_stats();
  CHECK(s.host_to_device == 1);
  CHECK(s.device_to_host == 0);
  CHECK(s.syncs == 0);
  CHECK(s.bytes == 1024);
  CHECK(sum(y).item() == 768.0);
  s = transfer_stats();
  CHECK(s.device_to_host == 1);
  CHECK(s.syncs == 1);
  backend_for(kGpu).synchronize(0);
  CHECK(transfer_stats().syncs == 2);
  CHECK(transfer_stats().host_to_device == 1);
}

// ---------------------------------------------------------------- a 16-bit step's kernels

namespace {

// The fused classifier in f64 from the logits' values: the mean loss over counted rows, and each
// row's gradient (softmax - onehot) / count.
std::pair<double, std::vector<double>> classified(const std::vector<double>& x, const std::vector<int64_t>& t,
                                                  int64_t N, int64_t V) {
  std::vector<double> grad(x.size(), 0.0);
  double loss = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) count += t[size_t(n)] != -1;
  for (int64_t n = 0; n < N; ++n) {
    if (t[size_t(n)] == -1) continue;
    const double* row = x.data() + n * V;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < V; ++i) s += std::exp(row[i] - m);
    loss += std::log(s) + m - row[t[size_t(n)]];
    for (int64_t i = 0; i < V; ++i)
      grad[size_t(n * V + i)] = (std::exp(row[i] - m) / s - (i == t[size_t(n)] ? 1.0 : 0.0)) / double(count);
  }
  return {count ? loss / double(count) : std::numeric_limits<double>::quiet_NaN(), grad};
}

// The largest |got - want| over |want|'s largest element (0 when both are all zero).
double max_error(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace

TEST_CASE("cuda: the fused classifier against the f64 reference and the CPU, in place and apart") {
  GPU_CASE();
  struct Case {
    int64_t N, V;
    int ignore_every;
  };
  // One row; lengths that are not whole 16-byte packs (33, 21) and that are (64, 50304); ignored
  // rows; every row ignored.
  for (const Case c : {Case{1, 5, 0}, Case{3, 33, 0}, Case{4, 64, 2}, Case{2, 50304, 0}, Case{9, 100, 3},
                       Case{6, 21, 1}}) {
    for (DType t : {DType::f32, DType::bf16, DType::f64}) {
      INFO(std::string(dtype_name(t)), " ", c.N, " x ", c.V, " ignoring every ", c.ignore_every);
      const Tensor logits = random_tensor({c.N, c.V}, 90 + uint64_t(c.V), t, 4.0);
      auto tv = Tensor::randint(0, c.V, {c.N}, 91).to_vector<int64_t>();
      if (c.ignore_every)
        for (size_t i = 0; i < tv.size(); i += size_t(c.ignore_every)) tv[i] = -1;
      const Tensor targets = Tensor::from_vector(tv, {c.N});
      const auto [want_loss, want_grad] = classified(host_values(logits), tv, c.N, c.V);
      auto run = [&](Device d, bool in_place) {
        Tensor w = logits.to(d).detach();
        w.requires_grad_();
        Tensor x = mul(w, 1.0);
        const Tensor loss = in_place ? fused_cross_entropy(std::move(x), targets.to(d), -1)
                                     : fused_cross_entropy(x, targets.to(d), -1);
        mul(loss, 2.0).backward();
        return std::pair{loss, w.grad()};
      };
      const auto [lc, gc] = run(kCpu, false);
      for (bool in_place : {false, true}) {
        INFO((in_place ? "in place" : "apart"));
        const auto [lg, gg] = run(kGpu, in_place);
        const double l = lg.item();
        if (c.ignore_every == 1) CHECK(std::isnan(l));
        else CHECK(std::abs(l - want_loss) <= (t == DType::f64 ? 1e-12 : 1e-5) * std::abs(want_loss) + 1e-6);
        std::vector<double> want2 = want_grad;
        for (double& g : want2) g *= 2.0;
        // A gradient rounded once to its dtype, of f32 arithmetic (f64 for f64).
        CHECK(max_error(host_values(gg), want2) <= (t == DType::bf16 ? 1.0 / 256 : t == DType::f32 ? 1e-5 : 1e-12));
        if (t == DType::bf16 && want2.size() >= 900) {
          // Per element: the exact gradient rounded once to nearest even (the GPU's f32 exp and sums
          // may turn a few in a thousand); rounding toward zero would leave about half equal.
          std::vector<double> once, toward_zero;
          for (const double g : want2) {
            once.push_back(rounded_to(t, g));
            toward_zero.push_back(truncated_to(t, g));
          }
          CHECK(share_equal(host_values(gg), once) >= 0.98);
          CHECK(share_equal(toward_zero, once) < 0.98);
        }
        CHECK(nmse(gg, gc) <= tolerance(t));
        CHECK(nmse(lg, lc) <= tolerance(t == DType::f64 ? t : DType::f32));
      }
    }
  }
}

TEST_CASE("cuda: layer_norm from the f32 stream into 16 bits, and its 16-bit gradient back into f32") {
  GPU_CASE();
  for (DType low : {DType::bf16, DType::f16}) {
    for (const Shape& shape : {Shape{37, 96}, Shape{3, 5, 768}}) {
      INFO(std::string(dtype_name(low)), " ", shape_str(shape));
      const int64_t D = shape.back();
      const Tensor x = add(random_tensor(shape, 95, DType::f32, 2.0), 0.5);
      const Tensor w = add(random_tensor({D}, 96, DType::f32, 0.1), 1.0), b = random_tensor({D}, 97, DType::f32, 0.1);
      const Tensor gy = random_tensor(shape, 98, low);
      auto run = [&](Device d) {
        Tensor xd = x.to(d).detach(), wd = w.to(d).detach(), bd = b.to(d).detach();
        for (Tensor* p : {&xd, &wd, &bd}) p->requires_grad_();
        const Tensor y = layer_norm(xd, wd, bd, 1e-5, low);
        sum(mul(y, gy.to(d))).backward();
        return std::vector<Tensor>{y, xd.grad(), wd.grad(), bd.grad()};
      };
      const auto c = run(kCpu), g = run(kGpu);
      CHECK(g[0].dtype() == low);
      CHECK(g[1].dtype() == DType::f32);
      CHECK(nmse(g[0], c[0]) <= tolerance(low));
      for (size_t i = 1; i < c.size(); ++i) CHECK(nmse(g[i], c[i]) <= tolerance(DType::f32));
    }
  }
}

TEST_CASE("cuda: rms_norm from the f32 stream into 16 bits, and its 16-bit gradient back into f32") {
  GPU_CASE();
  for (DType low : {DType::bf16, DType::f16}) {
    for (const Shape& shape : {Shape{37, 96}, Shape{3, 5, 768}}) {
      INFO(std::string(dtype_name(low)), " ", shape_str(shape));
      const int64_t D = shape.back();
      const Tensor x = add(random_tensor(shape, 105, DType::f32, 2.0), 0.5);
      const Tensor w = add(random_tensor({D}, 106, DType::f32, 0.1), 1.0);
      const Tensor gy = random_tensor(shape, 108, low);
      auto run = [&](Device d) {
        Tensor xd = x.to(d).detach(), wd = w.to(d).detach();
        for (Tensor* p : {&xd, &wd}) p->requires_grad_();
        const Tensor y = rms_norm(xd, wd, 1e-5, low);
        sum(mul(y, gy.to(d))).backward();
        return std::vector<Tensor>{y, xd.grad(), wd.grad()};
      };
      const auto c = run(kCpu), g = run(kGpu);
      CHECK(g[0].dtype() == low);
      CHECK(g[1].dtype() == DType::f32);
      CHECK(nmse(g[0], c[0]) <= tolerance(low));
      for (size_t i = 1; i < c.size(); ++i) CHECK(nmse(g[i], c[i]) <= tolerance(DType::f32));
    }
  }
}

TEST_CASE("cuda: a 16-bit branch added to the f32 stream, and scale_by, are exact") {
  GPU_CASE();
  for (DType low : {DType::bf16, DType::f16}) {
    INFO(std::string(dtype_name(low)));
    const Tensor s = random_tensor({33, 65}, 100, DType::f32), h = random_tensor({33, 65}, 101, low);
    CHECK(same_values(add(s.to(kGpu), h.to(kGpu)), add(s, h)));
    CHECK(same_values(add(h.to(kGpu), s.to(kGpu)), add(s, h)));
    CHECK(same_values(add(s.t().to(kGpu), h.to(kGpu).t()), add(s.t(), h.t())));  // strided
    // One contiguous run that does not start on 16 bytes.
    const Tensor sf = s.reshape({-1}).narrow(0, 1, 2000), hf = h.reshape({-1}).narrow(0, 3, 2000);
    CHECK(same_values(add(s.to(kGpu).reshape({-1}).narrow(0, 1, 2000), h.to(kGpu).reshape({-1}).narrow(0, 3, 2000)),
                      add(sf, hf)));
  }
  for (DType t : kFloatTypes) {
    INFO(std::string(dtype_name(t)));
    const DType acc = t == DType::f64 ? DType::f64 : DType::f32;
    for (double v : {1.0, 3.0, 0.1}) {
      const Tensor x = random_tensor({1000 + 3}, 102, t);  // a tail past the packs
      Tensor xc = x.clone(), xg = x.to(kGpu);
      backend_for(kCpu).scale_by(xc, Tensor::scalar(v, acc));
      backend_for(kGpu).scale_by(xg, Tensor::scalar(v, acc, kGpu));
      CHECK(same_values(xg, xc));
      if (v == 1.0) CHECK(same_values(xg, x));
      Tensor off = x.to(kGpu).narrow(0, 1, 1000).contiguous();  // a fresh block: aligned
      Tensor view = x.to(kGpu).narrow(0, 1, 1000);               // 1 element in: not on 16 bytes
      backend_for(kGpu).scale_by(view, Tensor::scalar(v, acc, kGpu));
      backend_for(kGpu).scale_by(off, Tensor::scalar(v, acc, kGpu));
      CHECK(same_values(view, off));
    }
  }
}

TEST_CASE("cuda: with TF32 allowed, f32 products read their operands with 10 mantissa bits, and only then") {
  GPU_CASE();
  Backend& gpu = backend_for(kGpu);
  // 1 + 2^-12 has no TF32 form (10 explicit mantissa bits: its neighbours are 1 and 1 + 2^-10, and
  // it rounds to 1 either way); the f32 product keeps it exactly. Through cuBLAS's GEMM (matmul)
  // and cuBLASLt (linear, with and without the bias epilogue).
  const float fine = 1.0f + std::ldexp(1.0f, -12);
  const int64_t K = 64;  // sizes where cuBLAS takes tensor cores when TF32 allows them
  const Tensor a = Tensor::full({64, K}, fine, DType::f32, kGpu), b = Tensor::full({K, 64}, 1.0f, DType::f32, kGpu);
  const Tensor w = Tensor::full({64, K}, 1.0f, DType::f32, kGpu), bias = Tensor::full({64}, 0.0f, DType::f32, kGpu);
  auto products = [&] {
    Tensor mm = Tensor::empty({64, 64}, DType::f32, kGpu), lin = Tensor::empty({64, 64}, DType::f32, kGpu),
           lin_bias = Tensor::empty({64, 64}, DType::f32, kGpu);
    gpu.matmul(a, b, mm);
    gpu.linear(a, w, Tensor(), LinearEpilogue::none, lin, Tensor());
    gpu.linear(a, w, bias, LinearEpilogue::none, lin_bias, Tensor());
    return std::vector<Tensor>{mm, lin, lin_bias};
  };
  const std::vector<Tensor> exact = products();
  set_allow_tf32(true);
  const std::vector<Tensor> tf32 = products();
  set_allow_tf32(false);
  for (size_t i = 0; i < exact.size(); ++i) {
    INFO("product ", i);
    CHECK(same_values(exact[i], Tensor::full({64, 64}, float(K) * fine)));
    CHECK(same_values(tf32[i], Tensor::full({64, 64}, float(K))));
  }
}

TEST_CASE("cuda: a 16-bit linear layer with its bias and GELU epilogue rounds each output once, to nearest, through tanh's GELU") {
  GPU_CASE();
  // Against the exact product of the 16-bit inputs plus the bias, then tanh's GELU, rounded once to
  // nearest even: the GPU sums in f32 in its own order, which may turn a rounding in a few elements
  // in a thousand (the emulator sums in f64: all equal); rounding toward zero matches about half,
  // erf's GELU 79% in bf16 and 57% in f16, and the check requires both to fail.
  Backend& gpu = backend_for(kGpu);
  const int64_t R = 64, K = 48, N = 40;
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(std::string(dtype_name(t)));
    const Tensor x = random_tensor({R, K}, 120, t), w = random_tensor({N, K}, 121, t, 0.3), bias = random_tensor({N}, 122, t);
    Tensor out = Tensor::empty({R, N}, t, kGpu), pre = Tensor::empty({R, N}, t, kGpu);
    gpu.linear(x.to(kGpu), w.to(kGpu), bias.to(kGpu), LinearEpilogue::gelu, out, pre);
    const auto xv = host_values(x), wv = host_values(w), bv = host_values(bias);
    std::vector<double> want_pre, want, truncated, erf_form;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double z = bv[size_t(n)];
        for (int64_t k = 0; k < K; ++k) z += xv[size_t(r * K + k)] * wv[size_t(n * K + k)];
        want_pre.push_back(rounded_to(t, z));
        want.push_back(rounded_to(t, gelu_tanh(z)));
        truncated.push_back(truncated_to(t, gelu_tanh(z)));
        erf_form.push_back(rounded_to(t, gelu_erf(z)));
      }
    const double kShare = 0.98;
    const double pre_share = share_equal(host_values(pre), want_pre), out_share = share_equal(host_values(out), want);
    MESSAGE(std::string(dtype_name(t)), ": ", pre_share, " of the GELU's inputs and ", out_share, " of the outputs as rounded once; "
            "toward zero would match ", share_equal(truncated, want), ", erf's GELU ", share_equal(erf_form, want));
    CHECK(pre_share >= kShare);
    CHECK(out_share >= kShare);
    // The check tells the nearest wrong variants apart.
    CHECK(share_equal(truncated, want) < kShare);
    CHECK(share_equal(erf_form, want) < kShare);
  }
}

TEST_CASE("cuda: 16-bit flash attention rounds P to 16 bits as an operand and each output once, to nearest") {
  GPU_CASE();
  // One tile of keys (T = 64; more than the decode kernel's 16 queries): the running maximum is the
  // row's maximum, so the kernel's arithmetic is, exactly up to f32 sums, P = exp(scale (s - max))
  // in f32, l = sum P, out = round(sum round(P) v / l), and the backward's dV = round(sum round(P) dO)
  // with P recomputed from the saved lse. The reference does that in f64. The nearest wrong variants
  // must fail the same criterion: rounding toward zero, and P kept in f32 (not an operand's dtype).
  Backend& gpu = backend_for(kGpu);
  const int64_t B = 1, H = 2, T = 64, hs = 64;
  const double scale = 1.0 / 8;
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(std::string(dtype_name(t)));
    const Tensor q = random_tensor({B, H, T, hs}, 130, t), k = random_tensor({B, H, T, hs}, 131, t),
                 v = random_tensor({B, H, T, hs}, 132, t), gout = random_tensor({B, H, T, hs}, 133, t);
    Tensor out = Tensor::empty({B, H, T, hs}, t, kGpu), lse = Tensor::empty({B, H, T}, DType::f32, kGpu);
    gpu.causal_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), scale, out, lse);
    Tensor gq = Tensor::empty({B, H, T, hs}, t, kGpu), gk = Tensor::empty({B, H, T, hs}, t, kGpu),
           gv = Tensor::empty({B, H, T, hs}, t, kGpu);
    gpu.causal_attention_backward(q.to(kGpu), k.to(kGpu), v.to(kGpu), out, lse, gout.to(kGpu), scale, gq, gk, gv);
    const auto qv = host_values(q), kv = host_values(k), vv = host_values(v), gov = host_values(gout),
               lsev = host_values(lse);
    std::vector<double> want, truncated, p_f32, want_gv, truncated_gv, p_f32_gv;
    std::vector<double> lse_err;
    for (int64_t h = 0; h < H; ++h) {
      const size_t base = size_t(h * T * hs);
      // P[i][j] as the forward computes it (from the row's maximum) and as the backward does (from lse).
      std::vector<double> p_fwd(size_t(T * T), 0.0), p_bwd(size_t(T * T), 0.0);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> sc(size_t(i + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hs; ++e) d += qv[base + size_t(i * hs + e)] * kv[base + size_t(j * hs + e)];
          sc[size_t(j)] = scale * d;
          mx = std::max(mx, sc[size_t(j)]);
        }
        double l = 0;
        for (int64_t j = 0; j <= i; ++j) l += (p_fwd[size_t(i * T + j)] = std::exp(sc[size_t(j)] - mx));
        lse_err.push_back(std::abs(lsev[size_t(h * T + i)] - (mx + std::log(l))));
        for (int64_t j = 0; j <= i; ++j) p_bwd[size_t(i * T + j)] = std::exp(sc[size_t(j)] - lsev[size_t(h * T + i)]);
        for (int64_t e = 0; e < hs; ++e) {
          double o = 0, o32 = 0;
          for (int64_t j = 0; j <= i; ++j) {
            const double pj = p_fwd[size_t(i * T + j)], vj = vv[base + size_t(j * hs + e)];
            o += rounded_to(t, pj) * vj;
            o32 += pj * vj;
          }
          want.push_back(rounded_to(t, o / l));
          truncated.push_back(truncated_to(t, o / l));
          p_f32.push_back(rounded_to(t, o32 / l));
        }
      }
      for (int64_t j = 0; j < T; ++j)
        for (int64_t e = 0; e < hs; ++e) {
          double d = 0, d32 = 0;
          for (int64_t i = j; i < T; ++i) {
            const double pij = p_bwd[size_t(i * T + j)], g = gov[base + size_t(i * hs + e)];
            d += rounded_to(t, pij) * g;
            d32 += pij * g;
          }
          want_gv.push_back(rounded_to(t, d));
          truncated_gv.push_back(truncated_to(t, d));
          p_f32_gv.push_back(rounded_to(t, d32));
        }
    }
    const double kShare = 0.98;
    const double out_share = share_equal(host_values(out), want), gv_share = share_equal(host_values(gv), want_gv);
    MESSAGE(std::string(dtype_name(t)), ": out ", out_share, " as rounded once (toward zero ", share_equal(truncated, want),
            ", P in f32 ", share_equal(p_f32, want), "); dV ", gv_share, " (toward zero ",
            share_equal(truncated_gv, want_gv), ", P in f32 ", share_equal(p_f32_gv, want_gv), ")");
    CHECK(out_share >= kShare);
    CHECK(gv_share >= kShare);
    CHECK(*std::max_element(lse_err.begin(), lse_err.end()) <= 1e-5);  // f32 logs of sums of f32 terms
    // The check tells the nearest wrong variants apart.
    CHECK(share_equal(truncated, want) < kShare);
    CHECK(share_equal(p_f32, want) < kShare);
    CHECK(share_equal(truncated_gv, want_gv) < kShare);
    CHECK(share_equal(p_f32_gv, want_gv) < kShare);
  }
}

TEST_CASE("cuda: 16-bit products into f32, and linear layers with cuBLASLt's epilogues and without") {
  GPU_CASE();
  Backend& gpu = backend_for(kGpu);
  Backend& cpu = backend_for(kCpu);
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(std::string(dtype_name(t)));
    const Tensor a = random_tensor({19, 40}, 110, t), b = random_tensor({40, 27}, 111, t);
    Tensor oc = Tensor::empty({19, 27}), og = Tensor::empty({19, 27}, DType::f32, kGpu);
    cpu.matmul(a, b, oc);
    gpu.matmul(a.to(kGpu), b.to(kGpu), og);
    CHECK(nmse(og, oc) <= 1e-12);  // products of 16-bit values are exact in f32; only the order differs
  }
  for (const char* epilogues : {"1", "0"}) {
    setenv("LATHE_CUDA_EPILOGUES", epilogues, 1);
    for (DType t : {DType::f32, DType::bf16}) {
      for (int64_t N : {int64_t(24), int64_t(20)}) {  // 20: no GELU input cuBLASLt takes (its ld is no multiple of 8)
        for (LinearEpilogue ep : {LinearEpilogue::none, LinearEpilogue::gelu}) {
          for (bool with_bias : {true, false}) {
            INFO("epilogues ", epilogues, " ", std::string(dtype_name(t)), " N ", N, ep == LinearEpilogue::gelu ? " gelu" : "",
                 with_bias ? " bias" : "");
            const int64_t R = 13, K = 40;
            // x a view one column into a wider tensor: its rows are 41 apart and not on 16 bytes.
            const Tensor xw = random_tensor({R, K + 1}, 112, t);
            const Tensor w = random_tensor({N, K}, 113, t, 0.2), bias = with_bias ? random_tensor({N}, 114, t) : Tensor();
            auto run = [&](Backend& be, Device d) {
              const Tensor x = xw.to(d).narrow(1, 1, K);
              Tensor out = Tensor::empty({R, N}, t, d), pre = Tensor::empty({R, N}, t, d);
              be.linear(x, w.to(d), with_bias ? bias.to(d) : Tensor(), ep, out,
                        ep == LinearEpilogue::gelu ? pre : Tensor());
              return std::pair{out, pre};
            };
            const auto [oc, pc] = run(cpu, kCpu);
            const auto [og, pg] = run(gpu, kGpu);
            CHECK(nmse(og, oc) <= tolerance(t));
            if (ep == LinearEpilogue::gelu) CHECK(nmse(pg, pc) <= tolerance(t));
          }
        }
        // The parameter gradients: f32 for 16-bit g and x, the bias's beside the weight's.
        INFO("backward, epilogues ", epilogues, " ", std::string(dtype_name(t)), " N ", N);
        const int64_t R = 29, K = 40;
        const Tensor g = random_tensor({R, N}, 115, t), xw = random_tensor({R, K + 3}, 116, t);
        for (bool with_weight : {true, false}) {
          auto run = [&](Backend& be, Device d) {
            Tensor gw = with_weight ? Tensor::empty({N, K}, DType::f32, d) : Tensor();
            Tensor gb = Tensor::empty({N}, DType::f32, d);
            be.linear_backward_weight(g.to(d), xw.to(d).narrow(1, 3, K), gw, gb);
            return std::pair{gw, gb};
          };
          const auto [wc, bc] = run(cpu, kCpu);
          const auto [wg, bg] = run(gpu, kGpu);
          if (with_weight) CHECK(nmse(wg, wc) <= 1e-12);
          CHECK(nmse(bg, bc) <= 1e-12);
        }
      }
    }
  }
  unsetenv("LATHE_CUDA_EPILOGUES");
}
