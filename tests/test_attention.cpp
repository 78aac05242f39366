// The fused causal attention (core/ops/nn_attention.cpp, core/cpu/attention.cpp): its
// gradient in f64, agreement with attention composed of matmul and softmax (what PyTorch's
// reference model computes), query blocks that end mid-sequence, strided views of one qkv
// projection as the model passes them, queries after a KV cache's keys, 16-bit inputs computed in
// f32, thread-count invariance, and bad input. tests/test_cuda.cpp checks the CUDA kernels
// against this one.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/autograd.h"
#include "core/ops.h"

using namespace lathe;

namespace {

// softmax(scale q k^T + causal mask) v, composed as nn's attention does without the fused kernel;
// query i sits at position Tk - Tq + i.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  Tensor key_pos = Tensor::arange(0, Tk, 1, DType::i64).view({1, Tk});
  Tensor query_pos = Tensor::arange(Tk - Tq, Tk, 1, DType::i64).view({Tq, 1});
  Tensor bias = where(gt(key_pos, query_pos), Tensor::scalar(-std::numeric_limits<double>::infinity(), q.dtype()),
                      Tensor::scalar(0.0, q.dtype()));
  Tensor att = add(mul(matmul(q, k.transpose(-2, -1)), scale), bias);
  return matmul(softmax(att, -1), v);
}

// q, k, v as the model makes them: views of one [B, T, 3C] projection, [B, H, T, hs] each.
std::vector<Tensor> qkv_views(int64_t B, int64_t T, int64_t H, int64_t hs, DType dtype, uint64_t seed) {
  const int64_t C = H * hs;
  Tensor qkv = Tensor::randn({B, T, 3 * C}, seed, 0, dtype).requires_grad_(true);
  std::vector<Tensor> out{qkv};
  for (int64_t i = 0; i < 3; ++i) out.push_back(qkv.narrow(2, i * C, C).view({B, T, H, hs}).transpose(1, 2));
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return max(abs(sub(a.to(DType::f64), b.to(DType::f64)))).item<double>();
}

}  // namespace

TEST_CASE("causal_attention: gradcheck in f64, across a query block's end (T = 67) and on strided views") {
  auto f = [](const std::vector<Tensor>& x) { return causal_attention(x[0], x[1], x[2], 0.37); };
  std::vector<Tensor> in;
  for (uint64_t s = 1; s <= 3; ++s) in.push_back(Tensor::randn({1, 2, 67, 3}, s, 0, DType::f64).requires_grad_(true));
  std::string msg = gradcheck(f, in);
  INFO(msg);
  CHECK(msg.empty());

  auto through_qkv = [](const std::vector<Tensor>& x) {
    const int64_t C = 6;
    auto h = [&](int64_t i) { return x[0].narrow(2, i * C, C).view({2, 5, 2, 3}).transpose(1, 2); };
    return causal_attention(h(0), h(1), h(2), 1.0 / std::sqrt(3.0));
  };
  msg = gradcheck(through_qkv, {Tensor::randn({2, 5, 18}, 9, 0, DType::f64).requires_grad_(true)});
  INFO(msg);
  CHECK(msg.empty());
}

TEST_CASE("causal_attention_qkv: gradcheck in f64, and the bits of causal_attention on the head views") {
  const std::string msg = gradcheck([](const std::vector<Tensor>& x) { return causal_attention_qkv(x[0], 2, 0.41); },
                                    {Tensor::randn({2, 67, 18}, 12, 0, DType::f64).requires_grad_(true)});
  INFO(msg);
  CHECK(msg.empty());

  // One [B, T, 3C] gradient written whole must carry exactly the bits of the three head views'
  // gradients scattered into it.
  for (int64_t T : {1, 64, 130}) {
    CAPTURE(T);
    std::vector<Tensor> a = qkv_views(2, T, 3, 8, DType::f32, 60 + uint64_t(T));
    const Tensor b = a[0].detach().clone().requires_grad_(true);
    const Tensor ya = causal_attention(a[1], a[2], a[3], 0.3).transpose(1, 2).reshape({2, T, 24});
    const Tensor yb = causal_attention_qkv(b, 3, 0.3);
    CHECK(yb.shape() == Shape{2, T, 24});
    CHECK(yb.contiguous().to_vector<float>() == ya.contiguous().to_vector<float>());
    const Tensor g = Tensor::randn(ya.shape(), 78);
    sum(mul(ya, g)).backward();
    sum(mul(yb, g)).backward();
    CHECK(b.grad().to_vector<float>() == a[0].grad().to_vector<float>());
  }
}

TEST_CASE("causal_attention: equals attention composed of matmul and softmax, forward and backward") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    for (int64_t T : {1, 64, 130}) {
      CAPTURE(T);
      std::vector<Tensor> a = qkv_views(2, T, 3, 8, dtype, 40 + uint64_t(T));
      std::vector<Tensor> b = qkv_views(2, T, 3, 8, dtype, 40 + uint64_t(T));
      const double scale = 1.0 / std::sqrt(8.0);
      Tensor ya = causal_attention(a[1], a[2], a[3], scale), yb = composed_attention(b[1], b[2], b[3], scale);
      CHECK(ya.shape() == yb.shape());
      CHECK(max_abs_diff(ya, yb) < tol);
      Tensor g = Tensor::randn(ya.shape(), 77, 0, dtype);
      sum(mul(ya, g)).backward();
      sum(mul(yb, g)).backward();
      CHECK(max_abs_diff(a[0].grad(), b[0].grad()) < 10 * tol);
    }
  }
}

TEST_CASE("causal_attention: f32 against f64 for head sizes of whole vectors, part vectors and tails") {
  // The f32 products run in register tiles of whole 16- (or 8-) float vectors with single columns
  // after them, and skip masked products tile by tile; f64 takes the BLAS GEMM over whole blocks.
  for (int64_t hs : {8, 24, 32, 48, 64, 72}) {
    for (int64_t T : {1, 7, 64, 100, 130}) {
      CAPTURE(hs);
      CAPTURE(T);
      std::vector<Tensor> a = qkv_views(2, T, 2, hs, DType::f32, 90 + uint64_t(hs + T));
      const Tensor b = a[0].detach().to(DType::f64).requires_grad_(true);
      const double scale = 1.0 / std::sqrt(double(hs));
      const Tensor ya = causal_attention_qkv(a[0], 2, scale), yb = causal_attention_qkv(b, 2, scale);
      CHECK(max_abs_diff(ya, yb) < 2e-5);
      const Tensor g = Tensor::randn(ya.shape(), 91);
      sum(mul(ya, g)).backward();
      sum(mul(yb, g.to(DType::f64))).backward();
      CHECK(max_abs_diff(a[0].grad(), b.grad()) < 1e-4);
    }
  }
}

TEST_CASE("causal_attention: the same bits at 1, 2 and 3 threads") {
  auto run = [](int threads) {
    const int prev = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<Tensor> x = qkv_views(3, 100, 2, 16, DType::f32, 5);
    Tensor y = causal_attention(x[1], x[2], x[3], 0.25);
    sum(mul(y, y)).backward();
    omp_set_num_threads(prev);
    std::vector<float> out = y.contiguous().to_vector<float>(), g = x[0].grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  const std::vector<float> one = run(1);
  CHECK(run(2) == one);
  CHECK(run(3) == one);
}

TEST_CASE("causal_attention: queries after a KV cache's keys, forward and backward, f64 gradcheck") {
  // Tq queries at positions Tk - Tq .. Tk - 1 against Tk keys: one query (sampling), a block and a
  // bit, and the whole sequence (no cache) as the limit case.
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{1, 1}, {1, 77}, {3, 70}, {70, 140}, {65, 65}}) {
      CAPTURE(Tq);
      CAPTURE(Tk);
      auto make = [&](int64_t T, uint64_t seed) {
        return Tensor::randn({2, 3, T, 8}, seed, 0, dtype).requires_grad_(true);
      };
      const Tensor qa = make(Tq, 1), ka = make(Tk, 2), va = make(Tk, 3);
      const Tensor qb = qa.detach().clone().requires_grad_(true), kb = ka.detach().clone().requires_grad_(true),
                   vb = va.detach().clone().requires_grad_(true);
      const Tensor ya = causal_attention(qa, ka, va, 0.35), yb = composed_attention(qb, kb, vb, 0.35);
      CHECK(max_abs_diff(ya, yb) < tol);
      const Tensor g = Tensor::randn(ya.shape(), 4, 0, dtype);
      sum(mul(ya, g)).backward();
      sum(mul(yb, g)).backward();
      CHECK(max_abs_diff(qa.grad(), qb.grad()) < 10 * tol);
      CHECK(max_abs_diff(ka.grad(), kb.grad()) < 10 * tol);
      CHECK(max_abs_diff(va.grad(), vb.grad()) < 10 * tol);
    }
  }
  auto f = [](const std::vector<Tensor>& x) { return causal_attention(x[0], x[1], x[2], 0.37); };
  const std::string msg = gradcheck(f, {Tensor::randn({1, 2, 5, 3}, 5, 0, DType::f64).requires_grad_(true),
                                        Tensor::randn({1, 2, 70, 3}, 6, 0, DType::f64).requires_grad_(true),
                                        Tensor::randn({1, 2, 70, 3}, 7, 0, DType::f64).requires_grad_(true)});
  INFO(msg);
  CHECK(msg.empty());
}

TEST_CASE("causal_attention: 16-bit inputs run the fused kernel in f32 and round once") {
  // The forward is exactly the f32 kernel on the widened inputs, rounded; the backward too, but
  // for rowsum(dO * O), which it forms from the rounded output.
  std::vector<Tensor> x = qkv_views(1, 70, 2, 8, DType::f32, 11);
  for (DType dtype : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dtype));
    std::vector<Tensor> h;
    for (int i = 1; i <= 3; ++i) h.push_back(x[size_t(i)].detach().to(dtype).requires_grad_(true));
    std::vector<Tensor> w;
    for (const Tensor& t : h) w.push_back(t.detach().to(DType::f32).requires_grad_(true));
    const Tensor got = causal_attention(h[0], h[1], h[2], 0.3), want = causal_attention(w[0], w[1], w[2], 0.3);
    CHECK(got.dtype() == dtype);
    CHECK(got.contiguous().to(DType::f32).to_vector<float>() ==
          want.to(dtype).contiguous().to(DType::f32).to_vector<float>());
    const Tensor g = Tensor::randn(got.shape(), 12);
    sum(mul(got, g.to(dtype))).backward();
    sum(mul(want, g.to(dtype).to(DType::f32))).backward();
    // A few units in the last place of the largest gradient (2^-8 relative for bf16, 2^-11 for f16).
    const double ulp = dtype == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
    for (int i = 0; i < 3; ++i) {
      const Tensor& want_grad = w[size_t(i)].grad();
      CHECK(h[size_t(i)].grad().dtype() == dtype);
      CHECK(max_abs_diff(h[size_t(i)].grad(), want_grad) < 4 * ulp * max(abs(want_grad)).item<double>());
    }
  }
}

TEST_CASE("causal_attention: bad input names the operand") {
  Tensor q = Tensor::randn({1, 2, 4, 8}, 1);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { causal_attention(q, Tensor::randn({1, 2, 5, 8}, 2), q, 1.0); }).find("must have q's shape") !=
        std::string::npos);
  CHECK(message([&] { causal_attention(q, q.to(DType::f64), q, 1.0); }).find("differ in dtype") != std::string::npos);
  // Fewer keys than queries: no position for the queries to sit at.
  CHECK(message([&] { causal_attention(Tensor::randn({1, 2, 5, 8}, 4), q, q, 1.0); })
            .find("or more positions") != std::string::npos);
  CHECK(message([&] { causal_attention(q.view({2, 4, 8}), q, q, 1.0); }).find("[B, H, T, head_size]") !=
        std::string::npos);
  CHECK(message([&] { causal_attention_qkv(Tensor::randn({2, 4, 20}, 3), 2, 1.0); })
            .find("f32[2, 4, 20] on cpu must be [B, T, 3 * n_head * head_size] with n_head = 2") != std::string::npos);
  CHECK(message([&] { causal_attention_qkv(q, 2, 1.0); }).find("[B, T, 3 * n_head") != std::string::npos);
  const Tensor i = Tensor::zeros({1, 1, 2, 2}, DType::i64);
  CHECK(message([&] { causal_attention(i, i, i, 1.0); }).find("causal_attention") != std::string::npos);
}
