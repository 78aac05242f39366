// Dtypes: casts between all 7 (bf16 and f16 round to nearest even, as torch), type promotion of
// binary ops, 16-bit arithmetic, integer ops and bool masks, against PyTorch where it has a say.
#include <doctest/doctest.h>

#include <limits>

#include "core_test_util.h"

using namespace lathe;
using core_test::compare;
using core_test::golden;
using core_test::tensor_of;

namespace {

const std::vector<DType> kAll = {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8};

// Exact comparison of values (NaN equal to NaN) with a message naming the first difference.
std::string exact(const Tensor& a, const Tensor& e) { return compare(a, e, 0.0, 0.0); }

}  // namespace

TEST_CASE("dtypes: names, sizes and classes") {
  for (DType t : kAll) CHECK(dtype_from_name(dtype_name(t)) == t);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::b8) == 1);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(is_floating(DType::f16));
  CHECK_FALSE(is_floating(DType::i32));
  CHECK(is_integral(DType::i32));
  CHECK_FALSE(is_integral(DType::b8));
  CHECK_THROWS_WITH_AS(dtype_from_name("float32"), doctest::Contains("unknown dtype 'float32'"), Error);
}

TEST_CASE("dtypes: casts between all 7 dtypes match torch") {
  int pairs = 0;
  for (const auto& c : core_test::golden_casts("cast")) {
    DType to = dtype_from_name(c.to);
    CAPTURE(c.from);
    CAPTURE(c.to);
    Tensor out = c.src.to(to);
    CHECK(out.dtype() == to);
    std::string diff = exact(out, c.dst);
    CHECK_MESSAGE(diff.empty(), diff);
    // The same cast as a strided copy into a view.
    Tensor dst = Tensor::zeros({c.src.numel(), 2}, to);
    dst.select(1, 1).copy_(c.src);
    CHECK(exact(dst.select(1, 1), out).empty());
    ++pairs;
  }
  CHECK(pairs == 49);
}

TEST_CASE("dtypes: f32 and f64 round to bf16 and f16 to nearest even, as torch") {
  int lists = 0;
  for (const auto& c : core_test::golden_casts("round")) {
    CAPTURE(c.from);
    CAPTURE(c.to);
    std::vector<double> src = c.src.to_vector<double>(), want = c.dst.to_vector<double>();
    std::vector<double> got = c.src.to(dtype_from_name(c.to)).to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(src[i]);
      CHECK(got[i] == want[i]);
    }
    ++lists;
  }
  CHECK(lists == 4);
  // The halfway cases, spelled out: 1 + 2^-8 lies between bf16's 1 and 1 + 2^-7.
  Tensor h = core_test::f32({1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, {2}).to(DType::bf16);
  CHECK(h.to_vector<float>() == std::vector<float>{1.0f, 1.0f + 0x1p-6f});
  Tensor g = core_test::f32({1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f}, {3}).to(DType::f16);
  CHECK(g.to_vector<float>() == std::vector<float>{1.0f, 1.0f + 0x1p-9f, std::numeric_limits<float>::infinity()});
}

TEST_CASE("dtypes: NaN and infinity survive float casts, casts to bool test for non-zero") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = core_test::f32({nan, inf, -inf, 0.0f, -0.0f, 1e-30f}, {6});
  for (DType t : {DType::f64, DType::bf16, DType::f16}) {
    std::vector<double> v = x.to(t).to_vector<double>();
    CHECK(std::isnan(v[0]));
    CHECK(v[1] == INFINITY);
    CHECK(v[2] == -INFINITY);
    CHECK(std::signbit(v[4]));
  }
  std::vector<double> b = x.to(DType::b8).to_vector<double>();
  CHECK(b == std::vector<double>{1, 1, 1, 0, 0, 1});
}

TEST_CASE("dtypes: type promotion of binary ops matches torch.result_type") {
  int pairs = 0;
  for (const auto& p : core_test::golden_promotions()) {
    const std::string& pa = p[0];
    const std::string& pb = p[1];
    DType a = dtype_from_name(pa), b = dtype_from_name(pb), want = dtype_from_name(p[2]);
    CAPTURE(pa);
    CAPTURE(pb);
    CHECK(promote(a, b) == want);
    CHECK(add(Tensor::ones({2}, a), Tensor::ones({2}, b)).dtype() == want);
    CHECK(where(Tensor::ones({2}, DType::b8), Tensor::ones({2}, a), Tensor::ones({2}, b)).dtype() == want);
    ++pairs;
  }
  CHECK(pairs == 49);
  // Comparisons always give bool; scalar forms keep the tensor's dtype unless the scalar needs a float.
  CHECK(lt(Tensor::ones({2}, DType::i32), Tensor::ones({2}, DType::f16)).dtype() == DType::b8);
  CHECK(add(Tensor::ones({2}, DType::i64), 2.0).dtype() == DType::i64);
  CHECK(mul(Tensor::ones({2}, DType::i32), 0.5).dtype() == DType::f32);
  CHECK(mul(Tensor::ones({2}, DType::b8), 2.0).dtype() == DType::f32);
  CHECK(mul(Tensor::ones({2}, DType::bf16), 0.5).dtype() == DType::bf16);
  CHECK(mul(Tensor::ones({2}, DType::f16), 3.0).dtype() == DType::f16);
}

TEST_CASE("dtypes: 16-bit and mixed-dtype arithmetic matches torch") {
  struct Case {
    const char* name;
    std::function<Tensor(const std::vector<Tensor>&)> f;
    double rtol;
  };
  // bf16 results are exact roundings of f32 arithmetic; exp and the sum may differ from torch's
  // by one bf16 ulp (2^-8 relative) where f32 results sit near a rounding boundary.
  const std::vector<Case> cases = {
      {"dt_bf16_add", [](auto& v) { return v[0] + v[1]; }, 0},
      {"dt_bf16_mul_scalar", [](auto& v) { return v[0] * 0.1; }, 0},
      {"dt_bf16_add_scalar", [](auto& v) { return v[0] + 1.001; }, 0},
      {"dt_f16_div", [](auto& v) { return v[0] / v[1]; }, 0},
      {"dt_f16_mul_scalar", [](auto& v) { return v[0] * 0.1; }, 0},
      {"dt_bf16_exp", [](auto& v) { return exp(v[0]); }, 0x1p-8},
      {"dt_bf16_sum", [](auto& v) { return sum(v[0], {1}); }, 0x1p-8},
      {"dt_bf16_f32_mul", [](auto& v) { return v[0] * v[1]; }, 0},
      {"dt_f16_bf16_add", [](auto& v) { return v[0] + v[1]; }, 0},
      {"dt_i32_f16_mul", [](auto& v) { return v[0] * v[1]; }, 0},
      {"dt_i64_i32_add", [](auto& v) { return v[0] + v[1]; }, 0},
      {"dt_bool_i32_add", [](auto& v) { return v[0] + v[1]; }, 0},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    std::vector<Tensor> in;
    for (const std::string& leaf : core_test::golden_inputs(name)) in.push_back(golden(name + "." + leaf));
    REQUIRE(!in.empty());
    Tensor out = c.f(in);
    Tensor want = golden(name + ".out");
    CHECK(out.dtype() == want.dtype());
    std::string diff = compare(out, want, c.rtol, 0);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("dtypes: integer arithmetic is exact, division is true division") {
  for (DType t : {DType::i32, DType::i64}) {
    CAPTURE(t);
    Tensor a = tensor_of({7, -7, 9, 0, 5}, {5}, t), b = tensor_of({2, 2, -4, 3, 5}, {5}, t);
    CHECK((a + b).dtype() == t);
    CHECK((a + b).to_vector<int64_t>() == std::vector<int64_t>{9, -5, 5, 3, 10});
    CHECK((a - b).to_vector<int64_t>() == std::vector<int64_t>{5, -9, 13, -3, 0});
    CHECK((a * b).to_vector<int64_t>() == std::vector<int64_t>{14, -14, -36, 0, 25});
    CHECK((-a).to_vector<int64_t>() == std::vector<int64_t>{-7, 7, -9, 0, -5});
    CHECK(abs(a).to_vector<int64_t>() == std::vector<int64_t>{7, 7, 9, 0, 5});
    CHECK(square(b).to_vector<int64_t>() == std::vector<int64_t>{4, 4, 16, 9, 25});
    CHECK(maximum(a, b).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 9, 3, 5});
    CHECK(minimum(a, b).to_vector<int64_t>() == std::vector<int64_t>{2, -7, -4, 0, 5});
    CHECK(clamp(a, -1.0, 6.0).to_vector<int64_t>() == std::vector<int64_t>{6, -1, 6, 0, 5});
    CHECK(relu(a).to_vector<int64_t>() == std::vector<int64_t>{7, 0, 9, 0, 5});
    CHECK((a + 3.0).to_vector<int64_t>() == std::vector<int64_t>{10, -4, 12, 3, 8});
    CHECK(sum(a).dtype() == DType::i64);
    CHECK(sum(a).item() == 14);
    CHECK(max(a).item() == 9);
    CHECK(argmax(a, 0).item() == 2);
    Tensor q = a / b;  // torch: true division in the default float type
    CHECK(q.dtype() == DType::f32);
    CHECK(exact(q, golden("int_div.out")).empty());
    CHECK((a / 2.0).dtype() == DType::f32);
    CHECK((a / 2.0).to_vector<float>() == std::vector<float>{3.5f, -3.5f, 4.5f, 0.0f, 2.5f});
    // Division by zero follows IEEE, as torch: no error and no crash.
    std::vector<float> z = (a / tensor_of({0, 0, 0, 0, 0}, {5}, t)).to_vector<float>();
    CHECK(z[0] == INFINITY);
    CHECK(z[1] == -INFINITY);
    CHECK(std::isnan(z[3]));
  }
  // Sums of i32 widen to i64, as torch, so they do not overflow.
  Tensor big = Tensor::full({4}, 2147483647.0, DType::i32);
  CHECK(sum(big).dtype() == DType::i64);
  CHECK(sum(big).item<int64_t>() == 4 * int64_t(2147483647));
  // Integer ops a float needs are refused with the op's name.
  CHECK_THROWS_WITH_AS(exp(Tensor::ones({2}, DType::i32)), doctest::Contains("exp: input must be a floating tensor"),
                       Error);
  CHECK_THROWS_WITH_AS(mean(Tensor::ones({2}, DType::i64)), doctest::Contains("mean"), Error);
  CHECK_THROWS_WITH_AS(pow(Tensor::ones({2}, DType::i64), Tensor::ones({2}, DType::i64)),
                       doctest::Contains("pow: not defined for dtype i64"), Error);
}

TEST_CASE("dtypes: bool masks from comparisons select, fill and count") {
  Tensor x = core_test::f32({-2, 0, 3, -1, 5, 0}, {2, 3});
  Tensor m = gt(x, Tensor::scalar(0));
  CHECK(m.dtype() == DType::b8);
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 1, 0});
  CHECK(sum(m).dtype() == DType::i64);
  CHECK(sum(m).item() == 2);
  CHECK(sum(m, {1}).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(m.to(DType::f32).to_vector<float>() == std::vector<float>{0, 0, 1, 0, 1, 0});
  CHECK(masked_fill(x, m, -9).to_vector<float>() == std::vector<float>{-2, 0, -9, -1, -9, 0});
  CHECK(where(m, x, Tensor::scalar(0)).to_vector<float>() == std::vector<float>{0, 0, 3, 0, 5, 0});
  // Masks combine with comparisons of masks and casts of numbers.
  Tensor nz = x.to(DType::b8);
  CHECK(nz.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 1, 1, 0});
  CHECK(ne(m, nz).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1, 0, 0});
  CHECK(eq(m, Tensor::scalar(1, DType::b8)).to_vector<int64_t>() == m.to_vector<int64_t>());
  // A mask row broadcasts over the rows of x.
  Tensor row = core_test::tensor_of({1, 0, 1}, {3}, DType::b8);
  CHECK(masked_fill(x, row, 7).to_vector<float>() == std::vector<float>{7, 0, 7, 7, 5, 7});
  CHECK_THROWS_WITH_AS(masked_fill(x, x, 1), doctest::Contains("masked_fill: mask must be bool"), Error);
  CHECK_THROWS_WITH_AS(Tensor::ones({2}, DType::b8).requires_grad_(), doctest::Contains("only floating tensors"),
                       Error);
}

TEST_CASE("dtypes: 16-bit tensors compute in f32 and keep gradients in their dtype") {
  Tensor x = core_test::f32({0.5f, -1.25f, 2.0f}, {3}).to(DType::bf16).requires_grad_(true);
  Tensor y = sum(mul(tanh(x), x));
  CHECK(y.dtype() == DType::bf16);
  y.backward();
  CHECK(x.grad().dtype() == DType::bf16);
  std::vector<float> g = x.grad().to_vector<float>();
  std::vector<float> xv = {0.5f, -1.25f, 2.0f};
  for (size_t i = 0; i < 3; ++i) {
    float t = std::tanh(xv[i]);
    CHECK(g[i] == doctest::Approx(t + xv[i] * (1 - t * t)).epsilon(1e-2));
  }
}
