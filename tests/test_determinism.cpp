// The CPU path is the reference: large ops give bitwise-identical results with 1, 2 or 3
// threads, because work is chunked by problem size and partial results combine in a fixed order.
#include <doctest/doctest.h>
#include <omp.h>

#include "core_test_util.h"

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
