// The CPU path is the reference: large ops give bitwise-identical results with 1, 2 or 3
// threads, because work is chunked by problem size and partial results combine in a fixed order.
#include <doctest/doctest.h>
#include <omp.h>

#include <fstream>

#include "core_test_util.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using core_test::same_bits;

namespace {

// Runs f with 1, 2 and 3 OpenMP threads and checks that every run gives the same bits.
void check_thread_invariant(const char* what, const std::function<Tensor()>& f) {
  CAPTURE(what);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor one = f();
  for (int n : {2, 3}) {
    omp_set_num_threads(n);
    Tensor other = f();
    CAPTURE(n);
    CHECK(same_bits(one, other));
  }
  omp_set_num_threads(saved);
}

}  // namespace

TEST_CASE("determinism: large reductions and broadcasts are thread-count invariant") {
  const Tensor big = Tensor::randn({10'000'000}, 1);
  check_thread_invariant("sum of 10M", [&] { return sum(big); });
  check_thread_invariant("mean of 10M", [&] { return mean(big); });
  const Tensor m = big.view({2500, 4000});
  check_thread_invariant("mean over rows", [&] { return mean(m, {1}); });
  check_thread_invariant("mean over columns", [&] { return mean(m, {0}); });
  check_thread_invariant("sum over a middle dim", [&] { return sum(big.view({100, 1000, 100}), {1}); });
  check_thread_invariant("mean over outer dims", [&] { return mean(big.view({100, 1000, 100}), {0, 2}); });
  check_thread_invariant("sum of a transposed view", [&] { return sum(m.t(), {1}); });
  check_thread_invariant("var over rows", [&] { return var(m, {1}); });
  check_thread_invariant("max over columns", [&] { return max(m, 0); });
  const Tensor row = Tensor::randn({4000}, 2);
  check_thread_invariant("broadcasting mul", [&] { return mul(m, row); });
  check_thread_invariant("broadcasting add of a column", [&] { return add(m, mean(m, {1}, true)); });
  check_thread_invariant("transcendental", [&] { return gelu(exp(mul(m, 0.1))); });
}

TEST_CASE("determinism: a column sum is each column's in-order sum, at any thread count") {
  // A bias gradient's shape: threads split the columns and a ragged last block of them remains,
  // yet every output must be the f64 sum of its column in row order, rounded once.
  const int64_t R = 2048, K = 200;
  const Tensor g = Tensor::randn({R, K}, 3);
  const std::vector<float> v = g.to_vector<float>();
  std::vector<float> expect(static_cast<size_t>(K), 0.0f);
  for (int64_t j = 0; j < K; ++j) {
    double acc = 0;
    for (int64_t r = 0; r < R; ++r) acc += double(v[size_t(r * K + j)]);
    expect[size_t(j)] = float(acc);
  }
  const int saved = omp_get_max_threads();
  for (int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    CAPTURE(n);
    CHECK(sum(g, {0}).to_vector<float>() == expect);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("determinism: matrix products are thread-count invariant") {
  // The shapes of a training step: activations times weights, the weight gradient (a long
  // inner dim), attention's batched products, and a product too small to split.
  const Tensor x = Tensor::randn({512, 128}, 11), w = Tensor::randn({128, 384}, 12);
  check_thread_invariant("activations x weights", [&] { return matmul(x, w); });
  const Tensor dy = Tensor::randn({512, 384}, 13);
  check_thread_invariant("weight gradient", [&] { return matmul(x.t(), dy); });
  const Tensor q = Tensor::randn({8, 4, 64, 32}, 14), k = Tensor::randn({8, 4, 32, 64}, 15);
  check_thread_invariant("batched attention scores", [&] { return matmul(q, k); });
  const Tensor big_a = Tensor::randn({1024, 768}, 16), big_b = Tensor::randn({768, 1000}, 17);
  check_thread_invariant("a large product", [&] { return matmul(big_a, big_b); });
  check_thread_invariant("a small product", [&] { return matmul(x.narrow(0, 0, 8), w); });
  const Tensor xd = x.to(DType::f64), wd = w.to(DType::f64);
  check_thread_invariant("f64", [&] { return matmul(xd, wd); });
}

TEST_CASE("determinism: accumulating backwards are thread-count invariant") {
  // Many repeated indices: a racing accumulation would sum in a thread-dependent order.
  const int64_t n = 200000;
  const Tensor idx = Tensor::randint(0, 50, {n}, 3);
  const Tensor g = Tensor::randn({n, 8}, 4);
  check_thread_invariant("index_select backward", [&] {
    Tensor x = Tensor::zeros({50, 8}).requires_grad_(true);
    sum(mul(index_select(x, 0, idx), g)).backward();
    return x.grad();
  });
  const Tensor gidx = Tensor::randint(0, 50, {8, n}, 5);
  const Tensor gg = Tensor::randn({8, n}, 6);
  check_thread_invariant("gather backward", [&] {
    Tensor x = Tensor::zeros({8, 50}).requires_grad_(true);
    sum(mul(gather(x, 1, gidx), gg)).backward();
    return x.grad();
  });
  check_thread_invariant("sum backward through expand", [&] {
    Tensor x = Tensor::randn({1, 8}, 7).requires_grad_(true);
    sum(mul(x.expand({n, 8}), g)).backward();
    return x.grad();
  });
}

TEST_CASE("determinism: a training run's weights do not depend on the thread count") {
  // train and bench choose the thread count from the machine's load as they run
  // (core/thread_governor.h); that is safe because every kernel gives the same bits at any count.
  const lathe::testing::TempDir dir("determinism_threads");
  std::ofstream(dir.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 64, "n_layer": 2, "n_head": 2, "n_embd": 64, "batch": 8})";
  std::ofstream text(dir.path / "corpus.txt");
  for (int i = 0; i < 400; ++i) text << "line " << i << ": the quick brown fox jumps over the lazy dog. ";
  text.close();
  std::string weights[3];
  for (int threads : {1, 2, 3}) {
    const std::string out = (dir.path / ("run" + std::to_string(threads))).string();
    const auto r = lathe::testing::run_lathe("train --quiet --sample-tokens 0 --steps 6 --eval-iters 1 --threads " +
                                             std::to_string(threads) + " --config " + (dir.path / "model.json").string() +
                                             " --data " + (dir.path / "corpus.txt").string() + " --out " + out);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    std::ifstream f(out + "/model.safetensors", std::ios::binary);
    weights[threads - 1] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  CHECK(!weights[0].empty());
  CHECK(weights[0] == weights[1]);
  CHECK(weights[0] == weights[2]);
}
