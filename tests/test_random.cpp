// Random numbers: Philox known answers, pinned values (a change of the generator must be a
// deliberate one: checkpoints and reference cases depend on it), reproducibility across devices,
// offsets and thread counts, Generator bookkeeping, and rough distribution checks.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>

#include "core_test_util.h"

using namespace lathe;
using core_test::same_bits;

namespace {

struct Moments {
  double mean = 0, std = 0, min = 0, max = 0;
};

Moments moments(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Moments m;
  m.min = m.max = v[0];
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / double(v.size() - 1));
  return m;
}

}  // namespace

TEST_CASE("random: Philox4x32-10 gives the Random123 known-answer vectors") {
  using A = std::array<uint32_t, 4>;
  CHECK(philox4x32(0, 0, 0) == A{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32(~0ull, ~0ull, ~0ull) == A{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32(0x85a308d3243f6a88ull, 0x0370734413198a2eull, 0x299f31d0a4093822ull) ==
        A{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("random: the first numbers of seed 0 are pinned") {
  // If one of these changes, every seeded initialisation and every golden case changes with it.
  CHECK(Tensor::rand({4}, 0).to_vector<float>() == std::vector<float>{0x1.989fap-2f, 0x1.f1c998p-1f, 0x1.3ea8cp-6f,
                                                                      0x1.9321dep-1f});
  CHECK(Tensor::randn({4}, 0).to_vector<float>() ==
        std::vector<float>{0x1.fb7666p-1f, -0x1.3aa6aep-3f, -0x1.2fb526p+0f, -0x1.30d93p-1f});
  CHECK(Tensor::randint(0, 1000, {4}, 0).to_vector<int64_t>() == std::vector<int64_t>{399, 972, 19, 787});
  CHECK(philox_uniform(0, 0) == 0x1.989fap-2f);
  CHECK(philox_normal(0, 3) == -0x1.30d93p-1f);
  CHECK(philox_below(0, 2, 1000) == 19);
}

TEST_CASE("random: same seed and offset give the same bits, an offset shifts the stream") {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    CAPTURE(t);
    CHECK(same_bits(Tensor::rand({3, 7}, 5, 11, t), Tensor::rand({3, 7}, 5, 11, t)));
    CHECK(same_bits(Tensor::randn({3, 7}, 5, 11, t), Tensor::randn({3, 7}, 5, 11, t)));
  }
  CHECK_FALSE(same_bits(Tensor::rand({64}, 5), Tensor::rand({64}, 6)));
  CHECK_FALSE(same_bits(Tensor::rand({64}, 5, 0), Tensor::rand({64}, 5, 1)));
  // Element i is draw offset + i: a later offset is a suffix of the same stream.
  Tensor whole = Tensor::randn({100}, 3, 0);
  CHECK(same_bits(Tensor::randn({90}, 3, 10), whole.narrow(0, 10, 90).contiguous()));
  CHECK(same_bits(Tensor::rand({5, 2}, 3, 4).reshape({10}), Tensor::rand({14}, 3).narrow(0, 4, 10).contiguous()));
  Tensor ints = Tensor::randint(-5, 5, {50}, 3, 0);
  CHECK(same_bits(Tensor::randint(-5, 5, {40}, 3, 10), ints.narrow(0, 10, 40).contiguous()));
  // f64 draws are the f32 draws widened: one stream whatever the dtype.
  CHECK(same_bits(Tensor::rand({33}, 9, 0, DType::f64), Tensor::rand({33}, 9).to(DType::f64)));
}

TEST_CASE("random: cpu and sim produce identical numbers") {
  Device sim = Device::sim();
  CHECK(same_bits(Tensor::rand({1000}, 42, 7, DType::f32, sim), Tensor::rand({1000}, 42, 7)));
  CHECK(same_bits(Tensor::randn({1000}, 42, 7, DType::f64, sim), Tensor::randn({1000}, 42, 7, DType::f64)));
  CHECK(same_bits(Tensor::randint(0, 17, {1000}, 42, 7, DType::i32, sim),
                  Tensor::randint(0, 17, {1000}, 42, 7, DType::i32)));
  CHECK(Tensor::rand({3}, 1, 0, DType::f32, sim).device() == sim);
}

TEST_CASE("random: large tensors are the same for every thread count") {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor a = Tensor::randn({300000}, 8);
  Tensor u = Tensor::rand({300000}, 8);
  omp_set_num_threads(3);
  Tensor b = Tensor::randn({300000}, 8);
  Tensor v = Tensor::rand({300000}, 8);
  omp_set_num_threads(saved);
  CHECK(same_bits(a, b));
  CHECK(same_bits(u, v));
}

TEST_CASE("random: Generator hands out disjoint offsets and restores from its state") {
  Generator g(7);
  CHECK(g.seed() == 7);
  CHECK(g.offset() == 0);
  CHECK(g.advance(10) == 0);
  CHECK(g.advance(5) == 10);
  CHECK(g.offset() == 15);
  // Draws after a save and restore repeat exactly.
  Generator saved(g.seed(), g.offset());
  std::vector<uint64_t> first, again;
  for (int i = 0; i < 5; ++i) first.push_back(g.next_below(1000));
  g.set_state(saved.seed(), saved.offset());
  for (int i = 0; i < 5; ++i) again.push_back(g.next_below(1000));
  CHECK(first == again);
  CHECK(g.offset() == 20);
  CHECK(saved.next_uniform() == philox_uniform(7, 15));
  // Tensors drawn at the generator's offsets do not overlap.
  Generator h(1);
  Tensor x = Tensor::rand({4}, h.seed(), h.advance(4));
  Tensor y = Tensor::rand({4}, h.seed(), h.advance(4));
  CHECK(same_bits(cat({x, y}), Tensor::rand({8}, 1)));
  // dropout advances its generator by one draw per element.
  Generator d(3);
  dropout(Tensor::ones({10}), 0.5, true, d);
  CHECK(d.offset() == 10);
}

TEST_CASE("random: distributions over 100k samples") {
  const int64_t n = 100000;
  Moments u = moments(Tensor::rand({n}, 2024));
  CHECK(u.min >= 0.0);
  CHECK(u.max < 1.0);
  CHECK(std::abs(u.mean - 0.5) < 0.01);
  CHECK(std::abs(u.std - std::sqrt(1.0 / 12.0)) < 0.01);

  Moments z = moments(Tensor::randn({n}, 2024));
  CHECK(std::abs(z.mean) < 0.02);
  CHECK(std::abs(z.std - 1.0) < 0.02);
  CHECK(z.min < -3.5);  // tails exist
  CHECK(z.max > 3.5);
  CHECK(z.max < 7.0);

  // A quarter of a normal lies beyond +-1.15 on each side (about 12.5% each).
  std::vector<float> zs = Tensor::randn({n}, 99).to_vector<float>();
  int64_t above = 0;
  for (float v : zs) above += v > 1.15f;
  CHECK(std::abs(double(above) / double(n) - 0.1251) < 0.005);

  std::vector<int64_t> k = Tensor::randint(-3, 7, {n}, 2024).to_vector<int64_t>();
  std::vector<int64_t> counts(10, 0);
  int64_t outside = 0;
  for (int64_t v : k) {
    if (v < -3 || v >= 7) ++outside;
    else counts[size_t(v + 3)]++;
  }
  CHECK(outside == 0);
  for (int64_t c : counts) CHECK(std::abs(c - n / 10) < 600);  // about 6 sigma
}

TEST_CASE("random: argument errors") {
  CHECK_THROWS_WITH_AS(Tensor::randint(5, 5, {2}, 0), doctest::Contains("randint: high (5) must be greater"), Error);
  CHECK_THROWS_WITH_AS(Tensor::randint(0, 5, {2}, 0, 0, DType::f32), doctest::Contains("randint: dtype must be"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor::rand({2}, 0, 0, DType::i64), doctest::Contains("rand: dtype i64 is not a floating"),
                       Error);
  CHECK(Tensor::rand({0, 3}, 0).numel() == 0);
}
