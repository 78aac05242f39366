// The ops of a 16-bit training step, against float64 references computed from the same inputs:
// the fused classifier (fused_cross_entropy: the loss and its gradient in one pass, in place over
// logits handed to it), the linear layer's product on f32 master weights with its bias and GELU
// epilogues and f32 weight gradients, LayerNorm from the f32 stream into 16 bits, the add that
// widens a 16-bit branch into the f32 stream, and the weight cast cache of the precision policy.
//
// Tolerances: f32 results within 1e-5 relative (sums of a few thousand f32 terms); a result rounded
// once to bf16 within 2^-8 relative of the f64 value (half an ulp: bf16 keeps 8 significant bits, so
// half an ulp is up to 2^-8 of a value at the bottom of its binade; the f32 arithmetic before the
// rounding adds far less), plus 1e-12 absolute where a value may be 0.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "train/train_step.h"
#include "tests/gpu_cases.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;

namespace {

std::vector<double> values(const Tensor& t) {
  return t.detach().to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
}

// Every element within rtol * |want| + atol of its reference; the message names the first that is not.
std::string close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  if (got.size() != want.size()) return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::abs(got[i] - want[i]) <= rtol * std::abs(want[i]) + atol))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
  }
  return "";
}

// ||got - want|| / ||want||: the error of sums whose terms were rounded, where elementwise bounds
// fail on cancellation.
double norm_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.detach().to(Device::cpu()).contiguous(), y = b.detach().to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

constexpr double kBf16 = 1.0 / 256;  // a bf16 rounding of an f32 result, relative
constexpr double kF32 = 1e-5;

// ---- the classifier's f64 reference: the mean loss over counted rows and each row's gradient
// (softmax - onehot) / count, from the logits' own values ----
struct Classified {
  double loss;
  std::vector<double> grad;
};

Classified classify(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t N, int64_t V,
                    int64_t ignore) {
  Classified r{0.0, std::vector<double>(x.size(), 0.0)};
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) count += t[size_t(n)] != ignore;
  for (int64_t n = 0; n < N; ++n) {
    if (t[size_t(n)] == ignore) continue;
    const double* row = x.data() + n * V;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < V; ++i) s += std::exp(row[i] - m);
    r.loss += std::log(s) + m - row[t[size_t(n)]];
    for (int64_t i = 0; i < V; ++i)
      r.grad[size_t(n * V + i)] = (std::exp(row[i] - m) / s - (i == t[size_t(n)] ? 1.0 : 0.0)) / double(count);
  }
  r.loss = count ? r.loss / double(count) : std::numeric_limits<double>::quiet_NaN();
  return r;
}

struct ClassifierCase {
  int64_t N, V;
  int ignore_every;  // every k-th row ignored (0: none; 1: all)
};

// Rows 1, rows past a parallel chunk, a vocabulary of 1, lengths that are no multiple of the vector
// lanes (16), GPT-2's 50,304, ignored rows and all rows ignored.
const ClassifierCase kClassifierCases[] = {{1, 5, 0},   {3, 1, 0},     {7, 33, 3},   {37, 16, 0},     {130, 257, 4},
                                           {9, 1000, 2}, {2, 50304, 0}, {3, 50304, 3}, {6, 21, 1}};

std::vector<int64_t> targets_for(const ClassifierCase& c, uint64_t seed) {
  auto t = Tensor::randint(0, c.V, {c.N}, seed).to_vector<int64_t>();
  if (c.ignore_every)
    for (size_t i = 0; i < t.size(); i += size_t(c.ignore_every)) t[i] = -1;
  return t;
}

}  // namespace

TEST_CASE("fused classifier: loss and gradient against the f64 reference, bf16 and f32, in place and apart") {
  for (const Device device : {Device::cpu(), Device::sim()}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      for (const ClassifierCase& c : kClassifierCases) {
        INFO(std::string(dtype_name(dt)), " ", c.N, " x ", c.V, " ignoring every ", c.ignore_every, " on ", device.str());
        const Tensor logits = mul(Tensor::randn({c.N, c.V}, 40 + uint64_t(c.V), 0), 4.0).to(dt).to(device);
        const std::vector<int64_t> tv = targets_for(c, 41);
        const Tensor t = Tensor::from_vector(tv, {c.N}).to(device);
        const Classified want = classify(values(logits), tv, c.N, c.V, -1);
        // A bf16 gradient is rounded twice here: by the forward (for an upstream gradient of 1), and
        // by the backward's scaling by 3 (a training step's upstream gradient is 1, and that second
        // rounding does not happen).
        const double tol = dt == DType::f32 ? kF32 : 2 * kBf16;
        const double atol = 1e-12;

        // Apart: the caller keeps its logits (a leaf), which stay as they were.
        Tensor x = logits.detach().clone().requires_grad_();
        const Tensor loss = fused_cross_entropy(x, t, -1);
        CHECK(loss.dtype() == DType::f32);
        CHECK(close({loss.item()}, {want.loss}, kF32, 0).empty());
        mul(loss, 3.0).backward();  // an upstream gradient of 3: the backward scales
        CHECK(x.grad().dtype() == dt);
        std::vector<double> want3 = want.grad;
        for (double& g : want3) g *= 3.0;
        const std::string diff = close(values(x.grad()), want3, tol, atol);
        CHECK_MESSAGE(diff.empty(), diff);
        CHECK(same_bits(x, logits));

        // In place: logits handed over (a non-leaf made here, moved in) give the same bits.
        Tensor w = logits.detach().clone().requires_grad_();
        Tensor moved = mul(w, 1.0);
        const Tensor loss2 = fused_cross_entropy(std::move(moved), t, -1);
        CHECK(same_bits(loss2, loss));
        mul(loss2, 3.0).backward();
        CHECK(same_bits(w.grad(), x.grad()));
      }
    }
  }
}

TEST_CASE("fused classifier: logits handed over become the gradient, logits the caller keeps do not") {
  const Device sim = Device::sim();
  const int64_t N = 64, V = 1000;
  const size_t logits_bytes = size_t(N * V) * sizeof(float);
  const Tensor t = Tensor::randint(0, V, {N}, 7).to(sim);
  const Tensor w = Tensor::randn({N, V}, 8, 0, DType::f32, sim).requires_grad_();
  // The memory a forward adds beyond its logits: one [N, V] gradient when the caller keeps them.
  auto added_by_forward = [&](bool hand_over) {
    Tensor logits = mul(w, 1.0);
    const size_t before = memory_stats(sim).allocated;
    Tensor loss = hand_over ? fused_cross_entropy(std::move(logits), t) : fused_cross_entropy(logits, t);
    const size_t added = memory_stats(sim).allocated - before;
    loss.backward();
    return added;
  };
  CHECK(added_by_forward(false) >= logits_bytes);
  CHECK(added_by_forward(true) < logits_bytes / 8);
}

TEST_CASE("fused classifier: a second backward is refused, gradcheck in f64 with ignored rows and a scale") {
  Tensor x = Tensor::randn({4, 9}, 3, 0, DType::f64).requires_grad_();
  const Tensor t = Tensor::from_vector<int64_t>({2, -100, 8, 0}, {4});
  Tensor loss = fused_cross_entropy(x, t);
  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK(error_of([&] { loss.backward(); }).find("fused_cross_entropy: its gradient is computed once") !=
        std::string::npos);

  auto f = [&](const std::vector<Tensor>& v) { return mul(fused_cross_entropy(v[0], t), 1.7); };
  CHECK(gradcheck(f, {Tensor::randn({4, 9}, 4, 0, DType::f64).requires_grad_()}) == "");
  auto f3 = [](const std::vector<Tensor>& v) {
    return fused_cross_entropy(v[0], Tensor::from_vector<int64_t>({1, 0, -1, 4, 4, 2}, {2, 3}), -1);
  };
  CHECK(gradcheck(f3, {Tensor::randn({2, 3, 5}, 5, 0, DType::f64).requires_grad_()}) == "");
  // Every row ignored: NaN loss (0 / 0, as PyTorch), zero gradient.
  Tensor z = Tensor::randn({3, 4}, 6).requires_grad_();
  Tensor none = fused_cross_entropy(z, Tensor::full({3}, -100, DType::i64));
  CHECK(std::isnan(none.item()));
  none.backward();
  for (double g : values(z.grad())) CHECK(g == 0.0);
  // Bad input: the op's name, the tensors.
  CHECK(error_of([] { fused_cross_entropy(Tensor::zeros({2, 3}), Tensor::zeros({3}, DType::i64)); })
            .find("fused_cross_entropy: targets") != std::string::npos);
  CHECK(error_of([] { fused_cross_entropy(Tensor::zeros({2, 3}), Tensor::from_vector<int64_t>({0, 3}, {2})); })
            .find("target 3 at position [1]") != std::string::npos);
}

TEST_CASE("linear: a 16-bit product on f32 masters, its bias and GELU rounded once, f32 weight gradients") {
  for (const Device device : {Device::cpu(), Device::sim()}) {
    for (bool gelu : {false, true}) {
      INFO((gelu ? "linear_gelu" : "linear"), " on ", device.str());
      const int64_t R = 45, K = 70, N = 24;
      const Tensor x = mul(Tensor::randn({3, 15, K}, 11), 0.5).to(DType::bf16).to(device).requires_grad_();
      const Tensor w = mul(Tensor::randn({N, K}, 12), 0.2).to(device).requires_grad_();
      const Tensor b = mul(Tensor::randn({N}, 13), 0.5).to(device).requires_grad_();
      const Tensor y = gelu ? nn::linear_gelu(x, w, b) : nn::linear(x, w, b);
      CHECK(y.dtype() == DType::bf16);
      CHECK(y.shape() == Shape{3, 15, N});
      // f64 reference from the operands the product reads: x, and w and b rounded to bf16.
      const auto xv = values(x), w16 = values(w.detach().to(DType::bf16)), b16 = values(b.detach().to(DType::bf16));
      std::vector<double> pre(size_t(R * N)), want(size_t(R * N));
      auto gelu_of = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
      for (int64_t r = 0; r < R; ++r)
        for (int64_t n = 0; n < N; ++n) {
          double acc = b16[size_t(n)];
          for (int64_t k = 0; k < K; ++k) acc += xv[size_t(r * K + k)] * w16[size_t(n * K + k)];
          pre[size_t(r * N + n)] = acc;
          want[size_t(r * N + n)] = gelu ? gelu_of(acc) : acc;
        }
      std::string diff = close(values(y), want, kBf16, 1e-5);
      CHECK_MESSAGE(diff.empty(), diff);

      const Tensor gy = mul(Tensor::randn({3, 15, N}, 14), 0.3).to(DType::bf16).to(device);
      sum(mul(y, gy)).backward();
      REQUIRE(w.grad().defined());
      CHECK(w.grad().dtype() == DType::f32);
      CHECK(b.grad().dtype() == DType::f32);
      CHECK(x.grad().dtype() == DType::bf16);
      // The gradient through the GELU is g * gelu'(pre) with pre rounded to bf16, then rounded itself.
      const auto gv = values(gy);
      std::vector<double> gpre(gv.size());
      for (size_t i = 0; i < gv.size(); ++i) {
        if (!gelu) {
          gpre[i] = gv[i];
          continue;
        }
        const double p = double(bf16(float(pre[i])));
        const double u = 0.7978845608028654 * (p + 0.044715 * p * p * p), th = std::tanh(u);
        const double d = 0.5 * (1 + th) + 0.5 * p * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * p * p);
        gpre[i] = double(bf16(float(gv[i] * d)));
      }
      std::vector<double> gw(size_t(N * K), 0.0), gb(size_t(N), 0.0);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t n = 0; n < N; ++n) {
          gb[size_t(n)] += gpre[size_t(r * N + n)];
          for (int64_t k = 0; k < K; ++k) gw[size_t(n * K + k)] += gpre[size_t(r * N + n)] * xv[size_t(r * K + k)];
        }
      if (gelu) {
        // Through the GELU the rows carry bf16 roundings of pre and of g * gelu'(pre), which the
        // f64 reference may round the other way: the sums agree as a whole.
        CHECK(norm_error(values(w.grad()), gw) < kBf16);
        CHECK(norm_error(values(b.grad()), gb) < kBf16);
      } else {
        diff = close(values(w.grad()), gw, kF32, 1e-5);
        CHECK_MESSAGE(diff.empty(), "weight gradient: ", diff);
        diff = close(values(b.grad()), gb, kF32, 1e-5);
        CHECK_MESSAGE(diff.empty(), "bias gradient: ", diff);
      }
    }
  }
}

TEST_CASE("linear: f32 is bitwise the product, then the bias, then the GELU, as before the fused kernel") {
  const Tensor x = Tensor::randn({33, 40}, 21), w = Tensor::randn({72, 40}, 22), b = Tensor::randn({72}, 23);
  Tensor y = add(matmul(x, w.t()), b);
  CHECK(same_bits(nn::linear(x, w, b), y));
  CHECK(same_bits(nn::linear_gelu(x, w, b), gelu(y)));
  // And the gradients, as the separate GELU and linear ops computed them: the GELU's backward,
  // then g @ w, g^T @ x and the rows' sum of g.
  Tensor xa = x.clone().requires_grad_(), wa = w.clone().requires_grad_(), ba = b.clone().requires_grad_();
  const Tensor g = Tensor::randn({33, 72}, 24);
  sum(mul(nn::linear_gelu(xa, wa, ba), g)).backward();
  Tensor pre = y.detach().clone().requires_grad_();
  sum(mul(gelu(pre), g)).backward();
  const Tensor gpre = pre.grad();
  CHECK(same_bits(xa.grad(), matmul(gpre, w)));
  CHECK(same_bits(wa.grad(), matmul(gpre.t(), x)));
  CHECK(same_bits(ba.grad(), sum(gpre, {0})));
  // gradcheck of the fused op in f64
  auto f = [](const std::vector<Tensor>& v) { return nn::linear_gelu(v[0], v[1], v[2]); };
  CHECK(gradcheck(f, {Tensor::randn({5, 6}, 25, 0, DType::f64).requires_grad_(),
                      Tensor::randn({7, 6}, 26, 0, DType::f64).requires_grad_(),
                      Tensor::randn({7}, 27, 0, DType::f64).requires_grad_()}) == "");
  // A 16-bit input takes f32 masters only.
  CHECK(error_of([] { nn::linear(Tensor::ones({2, 3}, DType::bf16), Tensor::ones({4, 3}, DType::f64)); })
            .find("a 16-bit input takes f32 master weights") != std::string::npos);
}

TEST_CASE("layer_norm: an f32 input into a 16-bit output is the f32 result rounded once, its backward is f32's") {
  for (DType low : {DType::bf16, DType::f16}) {
    INFO(dtype_name(low));
    const Tensor x = add(mul(Tensor::randn({13, 96}, 31), 2.0), 0.5);
    const Tensor w = add(mul(Tensor::randn({96}, 32), 0.1), 1.0), b = mul(Tensor::randn({96}, 33), 0.1);
    Tensor xa = x.clone().requires_grad_(), wa = w.clone().requires_grad_(), ba = b.clone().requires_grad_();
    Tensor xb = x.clone().requires_grad_(), wb = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
    const Tensor y = layer_norm(xa, wa, ba, 1e-5, low);
    const Tensor y32 = layer_norm(xb, wb, bb, 1e-5);
    CHECK(y.dtype() == low);
    CHECK(same_bits(y, y32.detach().to(low)));
    const Tensor g = Tensor::randn({13, 96}, 34).to(low);
    sum(mul(y, g)).backward();
    sum(mul(y32, g.to(DType::f32))).backward();
    CHECK(xa.grad().dtype() == DType::f32);
    CHECK(same_bits(xa.grad(), xb.grad()));
    CHECK(same_bits(wa.grad(), wb.grad()));
    CHECK(same_bits(ba.grad(), bb.grad()));
  }
  CHECK(error_of([] { layer_norm(Tensor::ones({2, 3}, DType::f64), Tensor(), Tensor(), 1e-5, DType::bf16); })
            .find("output is for an f32 input") != std::string::npos);
}

TEST_CASE("rms_norm: an f32 input into a 16-bit output is the f32 result rounded once, its backward is f32's") {
  for (DType low : {DType::bf16, DType::f16}) {
    INFO(dtype_name(low));
    const Tensor x = add(mul(Tensor::randn({13, 96}, 41), 2.0), 0.5);
    const Tensor w = add(mul(Tensor::randn({96}, 42), 0.1), 1.0);
    Tensor xa = x.clone().requires_grad_(), wa = w.clone().requires_grad_();
    Tensor xb = x.clone().requires_grad_(), wb = w.clone().requires_grad_();
    const Tensor y = rms_norm(xa, wa, 1e-5, low);
    const Tensor y32 = rms_norm(xb, wb, 1e-5);
    CHECK(y.dtype() == low);
    CHECK(same_bits(y, y32.detach().to(low)));
    const Tensor g = Tensor::randn({13, 96}, 43).to(low);
    sum(mul(y, g)).backward();
    sum(mul(y32, g.to(DType::f32))).backward();
    CHECK(xa.grad().dtype() == DType::f32);
    CHECK(same_bits(xa.grad(), xb.grad()));
    CHECK(same_bits(wa.grad(), wb.grad()));
  }
  CHECK(error_of([] { rms_norm(Tensor::ones({2, 3}, DType::f64), Tensor(), 1e-5, DType::bf16); })
            .find("output is for an f32 input") != std::string::npos);
}

TEST_CASE("add: a 16-bit branch joins the f32 stream without a cast, exactly") {
  const Tensor s = Tensor::randn({8, 50}, 41), h = Tensor::randn({8, 50}, 42).to(DType::bf16);
  reset_cast_count();
  const Tensor y = add(s, h), y2 = add(h, s);
  CHECK(cast_count() == 0);
  CHECK(y.dtype() == DType::f32);
  CHECK(same_bits(y, add(s, h.to(DType::f32))));
  CHECK(same_bits(y2, y));
  CHECK(same_bits(add(s.t(), h.t()), y.t().contiguous()));  // strided operands
  Tensor sa = s.clone().requires_grad_(), ha = h.clone().requires_grad_();
  sum(mul(add(sa, ha), 2.0)).backward();
  CHECK(ha.grad().dtype() == DType::bf16);
  CHECK(sa.grad().dtype() == DType::f32);
}

namespace {

// The GPT the cast tests run: two blocks 32 wide, a vocabulary of 64, 8 positions.
nn::GPTConfig cast_test_config() {
  nn::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// The casts one training step (the loss and its backward) runs.
uint64_t casts_of_step(const nn::GPT& m, const Tensor& idx, const Tensor& tgt) {
  reset_cast_count();
  m.loss(idx, tgt).backward();
  return cast_count();
}

}  // namespace

static void check_weight_cast_cache(const Device d) {
  nn::GPTConfig c = cast_test_config();
  nn::GPT m(c, 5, d);
  m.set_precision(nn::Precision::bf16);
  const Tensor idx = Tensor::randint(0, 64, {2, 8}, 1).to(d), tgt = Tensor::randint(0, 64, {2, 8}, 2).to(d);
  // The products' parameters: four weights and four biases a block, and the tied wte / lm_head once.
  const size_t cached = size_t(8 * c.n_layer + 1);

  const uint64_t first = casts_of_step(m, idx, tgt);
  CHECK(m.precision_policy().weight_cache().size() == cached);
  const uint64_t second = casts_of_step(m, idx, tgt);
  CHECK(first - second == cached);  // nothing changed: no weight cast again

  // An update of every parameter but one: each is cast again at the next forward, that one not.
  Tensor& frozen = m.transformer.h[0].mlp.c_fc.weight;
  std::vector<Tensor> trained;
  for (const Tensor& p : m.parameters())
    if (p.id() != frozen.id()) trained.push_back(p);
  optim::AdamW opt(trained, {{"lr", 1e-3}});
  opt.step();
  opt.zero_grad();
  CHECK(casts_of_step(m, idx, tgt) == second + cached - 1);
  // A write through copy_ (a checkpoint load) is an update too.
  frozen.copy_(frozen.detach());
  reset_cast_count();
  m.loss(idx, tgt);
  const uint64_t after_copy = cast_count();
  reset_cast_count();
  m.loss(idx, tgt);
  CHECK(after_copy == cast_count() + 1);
}

TEST_CASE("weight cast cache: each weight is cast once per version, an update re-casts it, an unchanged one is not") { check_weight_cast_cache(Device::cpu()); }

TEST_CASE("weight cast cache: each weight is cast once per version, an update re-casts it, an unchanged one is not, on cuda") {
  GPU_CASE();
  check_weight_cast_cache(Device::cuda());
}

static void check_bf16_step_casts(const Device d) {
  nn::GPTConfig c = cast_test_config();
  nn::GPT m(c, 5, d);
  m.set_precision(nn::Precision::bf16);
  const Tensor idx = Tensor::randint(0, 64, {2, 8}, 1).to(d), tgt = Tensor::randint(0, 64, {2, 8}, 2).to(d);
  // Every norm reads the f32 stream and writes what the product after it reads: no cast between.
  const Tensor stream = Tensor::randn({2, 8, 32}, 3).to(d);
  for (size_t i = 0; i < m.transformer.h.size(); ++i) {
    CHECK(m.transformer.h[i].ln_1->forward(stream).dtype() == DType::bf16);
    CHECK(m.transformer.h[i].ln_2->forward(stream).dtype() == DType::bf16);
  }
  CHECK(m.transformer.ln_f->forward(stream).dtype() == DType::bf16);
  // With the weights cached, a step casts where the table changes dtype and nowhere else: the
  // backward of each block's two widening adds narrows the f32 stream's gradient to its 16-bit
  // branch, and the classifier widens its count of counted targets. Norms writing f32 (each
  // product would then cast its input, forward and backward) show here as 4 more a block and 2 for
  // ln_f; a weight cast again, as one more each.
  m.loss(idx, tgt).backward();
  CHECK(casts_of_step(m, idx, tgt) == uint64_t(2 * c.n_layer + 1));
}

TEST_CASE("bf16 step: the norms write bf16 for the products, and a step casts only where the table changes dtype") { check_bf16_step_casts(Device::cpu()); }

TEST_CASE("bf16 step: the norms write bf16 for the products, and a step casts only where the table changes dtype, on cuda") {
  GPU_CASE();
  check_bf16_step_casts(Device::cuda());
}

static void check_modern_block_cast_cache(const Device d) {
  nn::GPTConfig c = cast_test_config();
  c.norm = nn::NormKind::rms_norm;
  c.activation = nn::Activation::swiglu;
  c.tie_embeddings = false;
  nn::GPT m(c, 5, d);
  m.set_precision(nn::Precision::bf16);
  const Tensor idx = Tensor::randint(0, 64, {2, 8}, 1).to(d), tgt = Tensor::randint(0, 64, {2, 8}, 2).to(d);
  // Five weights and five biases a block (c_gate's beside c_fc's), and lm_head's weight, apart
  // from wte, which the embedding reads in f32.
  const size_t cached = size_t(10 * c.n_layer + 1);
  const uint64_t first = casts_of_step(m, idx, tgt);
  CHECK(m.precision_policy().weight_cache().size() == cached);
  const uint64_t second = casts_of_step(m, idx, tgt);
  CHECK(first - second == cached);
  // An update of lm_head alone: it is cast again, nothing else is.
  m.lm_head.weight.copy_(m.lm_head.weight.detach());
  CHECK(casts_of_step(m, idx, tgt) == second + 1);
}

TEST_CASE("weight cast cache: the modern block's untied lm_head and SwiGLU's c_gate are cast once per version") { check_modern_block_cast_cache(Device::cpu()); }

TEST_CASE("weight cast cache: the modern block's untied lm_head and SwiGLU's c_gate are cast once per version, on cuda") {
  GPU_CASE();
  check_modern_block_cast_cache(Device::cuda());
}

// The fused AdamW writes the weights' 16-bit copies as it updates them (the trainer's connection):
// after its first step a step casts no weight, and everything is bitwise what casting after the
// update gives: the parameters, and each kept copy against the parameter cast now.
static void check_fused_adamw_writes_copies(const Device d) {
  const nn::GPTConfig c = cast_test_config();
  const Tensor idx = Tensor::randint(0, 64, {2, 8}, 1).to(d), tgt = Tensor::randint(0, 64, {2, 8}, 2).to(d);
  const uint64_t cached = uint64_t(8 * c.n_layer + 1);
  for (const nn::Precision precision : {nn::Precision::bf16, nn::Precision::fp16}) {
    INFO(nn::precision_name(precision));
    nn::GPT writes(c, 5, d), casts(c, 5, d);
    writes.set_precision(precision);
    casts.set_precision(precision);
    optim::AdamW opt_writes(writes.parameters(), {{"lr", 1e-2}}, /*fused=*/true);
    optim::AdamW opt_casts(casts.parameters(), {{"lr", 1e-2}}, /*fused=*/true);
    const auto connection = train::connect_weight_copies(writes, opt_writes);
    for (int step = 0; step < 3; ++step) {
      const uint64_t w = casts_of_step(writes, idx, tgt), k = casts_of_step(casts, idx, tgt);
      CHECK(k - w == (step == 0 ? 0 : cached));
      for (optim::Optimizer* opt : {static_cast<optim::Optimizer*>(&opt_writes), static_cast<optim::Optimizer*>(&opt_casts)}) {
        opt->step();
        opt->zero_grad();
      }
    }
    const std::vector<Tensor> pw = writes.parameters(), pk = casts.parameters();
    size_t kept = 0;
    for (size_t i = 0; i < pw.size(); ++i) {
      CHECK(same_bits(pw[i], pk[i]));
      if (!writes.precision_policy().weight_cache().fresh_copy(pw[i]).defined()) continue;
      ++kept;
      reset_cast_count();
      const Tensor copy = writes.precision_policy().weight(pw[i]);
      CHECK(cast_count() == 0);  // the copy the update wrote, not a new cast
      CHECK(same_bits(copy, pw[i].detach().to(nn::low_dtype(precision))));
    }
    CHECK(kept == cached);
  }
}

TEST_CASE("weight cast cache: the fused AdamW writes the 16-bit copies, bitwise the cast after the step, and a step casts no weight") {
  check_fused_adamw_writes_copies(Device::cpu());
}

TEST_CASE("weight cast cache: the fused AdamW writes the 16-bit copies, bitwise the cast after the step, and a step casts no weight, on cuda") {
  GPU_CASE();
  check_fused_adamw_writes_copies(Device::cuda());
}
