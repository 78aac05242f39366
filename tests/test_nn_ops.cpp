// Compute-heavy ops: matmul, softmax/log_softmax, layer_norm, embedding, cross_entropy, dropout,
// beyond their lines in the op registry (tests/test_op_cases.cpp: PyTorch's answers to its samples, gradcheck, sim, cuda):
// more gradchecks, bad-input errors, 16-bit inputs and thread-count determinism.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>

#include "core/autograd.h"
#include "core/ops.h"

using namespace lathe;

namespace {

Tensor randn64(const Shape& s, uint64_t seed) { return Tensor::randn(s, seed, 0, DType::f64).requires_grad_(true); }

void check_grad(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  std::string msg = gradcheck(f, inputs);
  INFO(msg);
  CHECK(msg.empty());
}

// Runs f with n OpenMP threads.
std::vector<float> with_threads(int n, const std::function<std::vector<float>()>& f) {
  int prev = omp_get_max_threads();
  omp_set_num_threads(n);
  std::vector<float> v = f();
  omp_set_num_threads(prev);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul

TEST_CASE("matmul: strided views need no contiguous copy to be right") {
  Tensor a = Tensor::randn({6, 8}, 1), b = Tensor::randn({8, 5}, 2);
  Tensor ref = matmul(a, b);
  std::vector<float> r = ref.to_vector<float>();
  // column-major a (transpose of a contiguous [8, 6]) and a row-strided b (every other row).
  Tensor at = a.t().contiguous().t();
  Tensor bs = Tensor::zeros({16, 5});
  bs.slice(0, 0, 16, 2).copy_(b);
  auto close = [&](const Tensor& x) {
    std::vector<float> v = x.to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(r[i]).epsilon(1e-5));
  };
  close(matmul(at, b));
  close(matmul(a, bs.slice(0, 0, 16, 2)));
  // neither row- nor column-major: strided in both dims
  Tensor big = Tensor::zeros({12, 16});
  big.slice(0, 0, 12, 2).slice(1, 0, 16, 2).copy_(a);
  close(matmul(big.slice(0, 0, 12, 2).slice(1, 0, 16, 2), b));
  // a broadcast (stride-0) batch operand
  Tensor batched = matmul(a.unsqueeze(0).expand({3, 6, 8}), b);
  for (int i = 0; i < 3; ++i) close(batched.select(0, i));
}

// The f32 product's paths (core/cpu/matmul.cpp): B packed into panels (transposed, a width that is
// not whole vectors, rows far apart), A copied block by block (column-major with K >= 1024), several
// k-blocks, a padded output, batches; each against the f64 product of the same values, and bitwise
// the same at 1, 2 and 3 threads.
TEST_CASE("matmul: f32 against f64 on every operand layout, the same bits at any thread count") {
  struct Case {
    int64_t M, N, K;
  };
  // The last two are tall: many row blocks of whole tiles, of two heights, the last tile short.
  const Case cases[] = {{1, 1, 1},     {5, 7, 3},      {17, 33, 65},  {100, 70, 129}, {64, 16, 1030},
                        {30, 600, 40}, {48, 96, 1100}, {7, 130, 520}, {200, 17, 9},   {1000, 40, 70},
                        {2051, 70, 33}};
  uint64_t seed = 10;
  for (const Case& c : cases)
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      // A stored as [M, K] or as [K, M] and viewed transposed; likewise B.
      Tensor a = ta ? Tensor::randn({c.K, c.M}, seed++).t() : Tensor::randn({c.M, c.K}, seed++);
      Tensor b = tb ? Tensor::randn({c.N, c.K}, seed++).t() : Tensor::randn({c.K, c.N}, seed++);
      INFO("M ", c.M, " N ", c.N, " K ", c.K, " A ", ta ? "column" : "row", "-major, B ", tb ? "column" : "row",
           "-major");
      const std::vector<double> want = matmul(a.to(DType::f64), b.to(DType::f64)).to_vector<double>();
      const std::vector<float> one = with_threads(1, [&] { return matmul(a, b).to_vector<float>(); });
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::fabs(double(one[i]) - want[i]) / std::sqrt(double(c.K)));
      CHECK(worst < 1e-5);  // randn entries: each of K terms rounds at 2^-24 of its size
      CHECK(with_threads(2, [&] { return matmul(a, b).to_vector<float>(); }) == one);
      CHECK(with_threads(3, [&] { return matmul(a, b).to_vector<float>(); }) == one);
    }
  // A batch whose B differs per element (packed once each) and one whose B is shared.
  Tensor a = Tensor::randn({3, 20, 40}, 1), b = Tensor::randn({3, 33, 40}, 2).transpose(1, 2);
  Tensor got = matmul(a, b), shared = matmul(a, b.select(0, 1));
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(got.select(0, i).to_vector<float>() == matmul(a.select(0, i), b.select(0, i)).to_vector<float>());
    CHECK(shared.select(0, i).to_vector<float>() == matmul(a.select(0, i), b.select(0, 1)).to_vector<float>());
  }
}

TEST_CASE("matmul: gradcheck with broadcasting and 1-D operands") {
  auto mm = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  check_grad(mm, {randn64({3, 4}, 1), randn64({4, 2}, 2)});
  check_grad(mm, {randn64({2, 1, 3, 4}, 3), randn64({3, 4, 2}, 4)});  // batch broadcast both ways
  check_grad(mm, {randn64({2, 3, 4}, 5), randn64({4, 2}, 6)});        // folded linear-layer path
  check_grad(mm, {randn64({4}, 7), randn64({2, 4, 3}, 8)});
  check_grad(mm, {randn64({3, 4}, 9), randn64({4}, 10)});
  check_grad(mm, {randn64({4}, 11), randn64({4}, 12)});
  check_grad([](const std::vector<Tensor>& x) { return matmul(x[0], x[1].t()); },
             {randn64({2, 3, 4}, 13), randn64({5, 4}, 14)});
}

TEST_CASE("matmul: bad input") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("a has 3 columns but b has 4 rows"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, Tensor::zeros({3}, DType::i64)), doctest::Contains("floating"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, Tensor::zeros({3, 2}, DType::f64)), doctest::Contains("dtypes differ"), Error);
  CHECK_THROWS_WITH_AS(matmul(a, Tensor::zeros({3, 2}, DType::f32, Device::sim(0))),
                       doctest::Contains("sim"), Error);
  CHECK_THROWS_WITH_AS(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})),
                       doctest::Contains("cannot be broadcast"), Error);
  CHECK_THROWS_AS(matmul(Tensor::scalar(1), Tensor::zeros({1})), Error);
}

TEST_CASE("matmul: empty inner dim gives zeros, bf16 computes in f32") {
  CHECK(sum(matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3}))).item() == 0);
  Tensor a = Tensor::randn({5, 33}, 3), b = Tensor::randn({33, 7}, 4);
  std::vector<float> ref = matmul(a, b).to_vector<float>();
  std::vector<float> half = matmul(a.to(DType::bf16), b.to(DType::bf16)).to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < ref.size(); ++i) CHECK(half[i] == doctest::Approx(ref[i]).epsilon(0.05).scale(6));
}

// ---------------------------------------------------------------------------------------------
// softmax / log_softmax

TEST_CASE("softmax: gradcheck over every dim") {
  for (int64_t d : {0, 1, 2, -1}) {
    check_grad([d](const std::vector<Tensor>& x) { return softmax(x[0], d); }, {randn64({2, 3, 19}, 20 + d)});
    check_grad([d](const std::vector<Tensor>& x) { return log_softmax(x[0], d); }, {randn64({2, 3, 19}, 30 + d)});
  }
}

TEST_CASE("softmax: masked rows, 0-d input, bad input") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({0, -inf, 1, -inf}, {1, 4});
  std::vector<float> y = softmax(x).to_vector<float>();
  CHECK(y[1] == 0.0f);  // exp(-inf) is exactly 0, as masked attention needs
  CHECK(y[3] == 0.0f);
  CHECK(y[0] + y[2] == doctest::Approx(1.0));
  CHECK(softmax(Tensor::scalar(3.0)).item() == 1.0);
  CHECK_THROWS_WITH_AS(softmax(Tensor::zeros({2}, DType::i64)), doctest::Contains("softmax"), Error);
  CHECK_THROWS_WITH_AS(log_softmax(Tensor::zeros({2, 3}), 2), doctest::Contains("log_softmax"), Error);
}

TEST_CASE("softmax: bf16 rows compute in f32") {
  Tensor x = Tensor::randn({4, 50}, 5);
  std::vector<float> ref = softmax(x).to_vector<float>();
  std::vector<float> half = softmax(x.to(DType::bf16)).to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < ref.size(); ++i) CHECK(half[i] == doctest::Approx(ref[i]).epsilon(0.02).scale(0.01));
}

// ---------------------------------------------------------------------------------------------
// layer_norm

TEST_CASE("layer_norm: gradcheck with and without weight/bias") {
  auto full = [](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], x[2], 1e-5); };
  check_grad(full, {randn64({3, 2, 21}, 40), randn64({21}, 41), randn64({21}, 42)});
  check_grad([](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], Tensor(), 1e-5); },
             {randn64({4, 5}, 43), randn64({5}, 44)});
  check_grad([](const std::vector<Tensor>& x) { return layer_norm(x[0], Tensor(), Tensor(), 1e-5); },
             {randn64({4, 18}, 45)});
  // weight that does not require grad: x's gradient still flows
  check_grad(full, {randn64({2, 7}, 46), Tensor::randn({7}, 47, 0, DType::f64), randn64({7}, 48)});
}

TEST_CASE("layer_norm: bad input") {
  Tensor x = Tensor::zeros({2, 4});
  CHECK_THROWS_WITH_AS(layer_norm(x, Tensor::ones({5}), Tensor()), doctest::Contains("weight f32[5]"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, Tensor(), Tensor::ones({4}, DType::f64)), doctest::Contains("bias"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, Tensor::ones({4}, DType::f32, Device::sim(0)), Tensor()),
                       doctest::Contains("sim"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(Tensor::zeros({2, 4}, DType::i32), Tensor(), Tensor()),
                       doctest::Contains("floating"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(Tensor::zeros({2, 0}), Tensor(), Tensor()), doctest::Contains("empty"), Error);
}

// ---------------------------------------------------------------------------------------------
// embedding

TEST_CASE("embedding: i32 ids give the i64 ids' rows") {
  Tensor w = Tensor::randn({10, 20}, 3);
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 3, 1, 9, 0, 3}, {2, 3});
  CHECK(embedding(w, ids.to(DType::i32)).to_vector<float>() == embedding(w, ids).to_vector<float>());
}

TEST_CASE("embedding: gradcheck with repeated ids") {
  Tensor idx = Tensor::from_vector<int64_t>({4, 1, 4, 0, 4, 2}, {2, 3});
  check_grad([idx](const std::vector<Tensor>& x) { return embedding(x[0], idx); }, {randn64({5, 3}, 50)});
}

TEST_CASE("embedding: bad input") {
  Tensor w = Tensor::zeros({10, 4});
  Tensor idx = Tensor::from_vector<int64_t>({1, 2, 3, 12}, {2, 2});
  CHECK_THROWS_WITH_AS(embedding(w, idx), doctest::Contains("id 12 at position [1, 1]"), Error);
  CHECK_THROWS_WITH_AS(embedding(w, idx), doctest::Contains("vocab size 10"), Error);
  CHECK_THROWS_WITH_AS(embedding(w, Tensor::from_vector<int32_t>({-1}, {1})), doctest::Contains("id -1"), Error);
  CHECK_THROWS_WITH_AS(embedding(w, Tensor::zeros({2})), doctest::Contains("i64 or i32"), Error);
  CHECK_THROWS_WITH_AS(embedding(Tensor::zeros({10}), Tensor::zeros({2}, DType::i64)), doctest::Contains("2-D"),
                       Error);
  CHECK_THROWS_WITH_AS(embedding(w, Tensor::zeros({2}, DType::i64, Device::sim(0))), doctest::Contains("sim"),
                       Error);
}

// ---------------------------------------------------------------------------------------------
// cross_entropy

TEST_CASE("cross_entropy: gradcheck with and without ignored rows") {
  Tensor t = Tensor::from_vector<int64_t>({0, 3, 20, 7}, {4});
  check_grad([t](const std::vector<Tensor>& x) { return cross_entropy(x[0], t); }, {randn64({4, 21}, 60)});
  Tensor ti = Tensor::from_vector<int64_t>({-100, 3, -100, 1, 0, 2}, {2, 3});
  check_grad([ti](const std::vector<Tensor>& x) { return cross_entropy(x[0], ti); }, {randn64({2, 3, 4}, 61)});
}

TEST_CASE("cross_entropy: all rows ignored gives NaN, bad input") {
  Tensor logits = Tensor::zeros({2, 3}).requires_grad_(true);
  Tensor loss = cross_entropy(logits, Tensor::full({2}, -100, DType::i64));
  CHECK(std::isnan(loss.item()));
  Tensor t = Tensor::from_vector<int64_t>({0, 3}, {2});
  CHECK_THROWS_WITH_AS(cross_entropy(logits, t), doctest::Contains("target 3 at position [1]"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, t), doctest::Contains("number of classes 3"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector<int64_t>({0, -5}, {2})),
                       doctest::Contains("target -5"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::zeros({3}, DType::i64)), doctest::Contains("expected targets of shape [2]"),
                       Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::zeros({2})), doctest::Contains("i64 or i32"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({2}, DType::i64)),
                       doctest::Contains("floating"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::zeros({2}, DType::i64, Device::sim(0))),
                       doctest::Contains("sim"), Error);
}

TEST_CASE("cross_entropy: bf16 logits compute in f32") {
  Tensor x = Tensor::randn({3, 40}, 7);
  Tensor t = Tensor::from_vector<int64_t>({1, 39, 0}, {3});
  double ref = cross_entropy(x, t).item();
  CHECK(cross_entropy(x.to(DType::bf16), t).item() == doctest::Approx(ref).epsilon(0.02));
}

// ---------------------------------------------------------------------------------------------
// dropout

TEST_CASE("dropout: inverted scaling, generator-driven mask, gradient through the mask") {
  Generator gen(7);
  Tensor x = Tensor::ones({100, 100}).requires_grad_(true);
  CHECK(dropout(x, 0.3, /*training=*/false, gen).id() == x.id());
  CHECK(dropout(x, 0.0, true, gen).id() == x.id());
  CHECK(gen.offset() == 0);

  Tensor y = dropout(x, 0.25, true, gen);
  CHECK(gen.offset() == 10000);
  std::vector<float> v = y.to_vector<float>();
  int zeros = 0;
  for (float e : v) {
    if (e == 0) ++zeros;
    else CHECK(e == doctest::Approx(1 / 0.75));
  }
  CHECK(zeros == doctest::Approx(2500).epsilon(0.1));
  // element i is dropped exactly when philox_uniform(seed, offset + i) < p
  for (int i = 0; i < 200; ++i) CHECK((v[size_t(i)] == 0) == (philox_uniform(7, uint64_t(i)) < 0.25f));

  sum(y).backward();
  CHECK(x.grad().to_vector<float>() == v);  // d(sum y)/dx = mask / (1 - p) = y for x = 1

  Generator again(7);
  CHECK(dropout(x, 0.25, true, again).to_vector<float>() == v);  // same state, same mask
  CHECK(dropout(x, 0.25, true, again).to_vector<float>() != v);  // the generator moved on
}

TEST_CASE("dropout: bad p") {
  Generator gen(1);
  Tensor x = Tensor::ones({4});
  CHECK_THROWS_WITH_AS(dropout(x, 1.0, true, gen), doctest::Contains("p = 1"), Error);
  CHECK_THROWS_WITH_AS(dropout(x, -0.1, true, gen), doctest::Contains("p = -0.1"), Error);
  CHECK_THROWS_WITH_AS(dropout(Tensor::zeros({2}, DType::i64), 0.5, true, gen), doctest::Contains("floating"), Error);
}

// ---------------------------------------------------------------------------------------------
// placement: the same ops on a sim device give the CPU's results, and the results stay there

TEST_CASE("nn ops run on a sim device like on the cpu") {
  Tensor x = Tensor::randn({6, 37}, 21), w = Tensor::randn({37, 5}, 22);
  Tensor t = Tensor::from_vector<int64_t>({0, 36, -100, 3, 3, 9}, {6});
  auto run = [&](Device d) {
    Tensor xd = x.to(d).requires_grad_(true), wd = w.to(d).requires_grad_(true);
    Tensor h = layer_norm(matmul(xd.t(), xd), Tensor(), Tensor());
    Tensor loss = add(cross_entropy(xd, t.to(d)), sum(mul(softmax(matmul(xd, wd), 0), h.narrow(0, 0, 6).narrow(1, 0, 5))));
    Tensor e = embedding(wd, Tensor::from_vector<int64_t>({4, 0, 4}, {3}).to(d));
    loss = add(loss, sum(e));
    loss.backward();
    CHECK(loss.device() == d);
    CHECK(xd.grad().device() == d);
    std::vector<float> v = xd.grad().to(Device::cpu()).to_vector<float>();
    std::vector<float> vw = wd.grad().to(Device::cpu()).to_vector<float>();
    v.insert(v.end(), vw.begin(), vw.end());
    v.push_back(float(loss.item()));
    return v;
  };
  CHECK(run(Device::cpu()) == run(Device::sim(0)));
}

// ---------------------------------------------------------------------------------------------
// determinism: the row kernels give the same bits for any thread count

TEST_CASE("nn kernels: results do not depend on the thread count") {
  Tensor x = Tensor::randn({300, 257}, 11).requires_grad_(true);
  Tensor w = Tensor::randn({257}, 12).requires_grad_(true);
  Tensor t = Tensor::randint(0, 257, {300}, 13);
  Tensor g = Tensor::randn({300, 257}, 14);
  auto ln_grads = [&] {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    sum(mul(layer_norm(x, w, Tensor()), g)).backward();
    std::vector<float> v = x.grad().to_vector<float>(), vw = w.grad().to_vector<float>();
    v.insert(v.end(), vw.begin(), vw.end());
    return v;
  };
  auto ce_grad = [&] {
    x.set_grad(Tensor());
    cross_entropy(x, t).backward();
    return x.grad().to_vector<float>();
  };
  auto emb_grad = [&] {
    x.set_grad(Tensor());
    Tensor ids = Tensor::randint(0, 300, {4000}, 15);
    sum(mul(embedding(x, ids), Tensor::randn({4000, 257}, 16))).backward();
    return x.grad().to_vector<float>();
  };
  auto sm = [&] { return softmax(x.detach(), 0).to_vector<float>(); };
  for (const auto& f : std::vector<std::function<std::vector<float>()>>{ln_grads, ce_grad, emb_grad, sm})
    CHECK(with_threads(1, f) == with_threads(2, f));
}
