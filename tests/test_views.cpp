// Views: they share storage, have the strides PyTorch gives them, fail with messages that name
// the op and the shapes, and each one's backward (gradcheck in f64 and hand-computed values).
#include <doctest/doctest.h>

#include "core_test_util.h"

using namespace lathe;

namespace {

// 0, 1, 2, ... as f32 in `shape`.
Tensor iota(const Shape& shape) {
  return Tensor::arange(0, numel_of(shape), 1, DType::f32).reshape(shape);
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Gradcheck of f on one random f64 input of `shape`.
std::string gradcheck_view(const Shape& shape, const std::function<Tensor(const Tensor&)>& f) {
  Tensor x = Tensor::randn(shape, 99, 0, DType::f64).requires_grad_(true);
  return gradcheck([&](const std::vector<Tensor>& v) { return f(v[0]); }, {x});
}

// The gradient of sum(f(x) * w) for x = iota(shape) and w = 1, 2, 3, ... over f(x)'s elements.
std::vector<float> grad_of(const Shape& shape, const std::function<Tensor(const Tensor&)>& f) {
  Tensor x = iota(shape).requires_grad_(true);
  Tensor y = f(x);
  Tensor w = Tensor::arange(1, y.numel() + 1, 1, DType::f32).reshape(y.shape());
  sum(mul(y, w)).backward();
  return values(x.grad());
}

}  // namespace

TEST_CASE("views: view shares storage and infers one dim") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, -1});
  CHECK(v.shape() == Shape{6, 4});
  CHECK(v.strides() == Strides{4, 1});
  CHECK(v.storage() == x.storage());
  v.select(0, 5).fill_(-1);  // writes through to x
  CHECK(values(x.select(0, 1).select(0, 2)) == std::vector<float>{-1, -1, -1, -1});
  CHECK(x.view({24}).shape() == Shape{24});
  CHECK(x.view({-1}).shape() == Shape{24});
  CHECK(Tensor::scalar(2).view({1, 1}).shape() == Shape{1, 1});
  CHECK(Tensor::ones({1}).view({}).shape() == Shape{});
  CHECK(Tensor::zeros({0, 3}).view({3, 0}).shape() == Shape{3, 0});

  CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("view: only one dimension can be -1"), Error);
  CHECK_THROWS_WITH_AS(x.view({5, -1}), doctest::Contains("view: shape [5, -1] is invalid"), Error);
  CHECK_THROWS_WITH_AS(x.view({5, 5}), doctest::Contains("view: shape [5, 5] is invalid for f32[2, 3, 4]"), Error);
  CHECK_THROWS_WITH_AS(x.view({-2, 12}), doctest::Contains("invalid shape"), Error);
}

TEST_CASE("views: view of a non-contiguous tensor works exactly when strides allow it") {
  Tensor x = iota({4, 6});
  Tensor n = x.narrow(1, 0, 3);  // [4, 3] with strides [6, 1]
  Tensor v = n.view({2, 2, 3});  // splitting the row dim keeps the column run
  CHECK(v.strides() == Strides{12, 6, 1});
  CHECK(v.storage() == x.storage());
  CHECK(values(v.contiguous()) == values(n.contiguous()));
  CHECK_THROWS_WITH_AS(n.view({12}), doctest::Contains("use reshape"), Error);
  // A transposed tensor can split or merge within its (now outer) column dim only.
  Tensor t = iota({2, 6}).t();  // [6, 2], strides [1, 6]
  CHECK(t.view({3, 2, 2}).strides() == Strides{2, 1, 6});
  CHECK_THROWS_AS(t.view({12}), Error);
  // Size-1 dims may carry any stride.
  Tensor one = iota({3, 1, 4}).transpose(0, 1);  // [1, 3, 4]
  CHECK(one.view({12}).storage() == one.storage());
  // A broadcast (stride 0) dim cannot be merged with others.
  Tensor e = iota({3}).expand({2, 3});
  CHECK_THROWS_AS(e.view({6}), Error);
  CHECK(values(e.reshape({6})) == std::vector<float>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("views: reshape is a view when possible, else a copy") {
  Tensor x = iota({2, 3});
  Tensor r = x.reshape({3, 2});
  CHECK(r.storage() == x.storage());
  Tensor c = x.t().reshape({6});
  CHECK(c.storage() != x.storage());
  CHECK(values(c) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.flatten().shape() == Shape{6});
  CHECK_THROWS_WITH_AS(x.reshape({4, 2}), doctest::Contains("view: shape [4, 2] is invalid"), Error);
}

TEST_CASE("views: transpose and permute swap strides and share storage") {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Strides{1, 4, 12});
  CHECK(t.storage() == x.storage());
  CHECK_FALSE(t.is_contiguous());
  CHECK(x.transpose(-1, -3).strides() == t.strides());
  CHECK(x.transpose(1, 1).strides() == x.strides());
  Tensor p = x.permute({1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(p.strides() == Strides{4, 1, 12});
  CHECK(values(p.contiguous())[1] == 12);  // p[0, 0, 1] = x[1, 0, 0]
  CHECK(x.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK(Tensor::scalar(1).transpose(0, 0).dim() == 0);
  CHECK(iota({2, 3}).t().shape() == Shape{3, 2});

  CHECK_THROWS_WITH_AS(x.permute({0, 1}), doctest::Contains("permute: 2 dims given for f32[2, 3, 4]"), Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 1}), doctest::Contains("permute: dim 1 repeated"), Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 3}), doctest::Contains("permute: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.transpose(0, 3), doctest::Contains("transpose: dim 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(Tensor::scalar(1).transpose(0, 2), doctest::Contains("transpose: dim 2 is out of range"),
                       Error);
}

TEST_CASE("views: narrow, slice and select address into the same storage") {
  Tensor x = iota({4, 5});
  Tensor n = x.narrow(1, 1, 3);
  CHECK(n.shape() == Shape{4, 3});
  CHECK(n.offset() == 1);
  CHECK(n.strides() == Strides{5, 1});
  CHECK(values(n.select(0, 0)) == std::vector<float>{1, 2, 3});
  CHECK(x.narrow(0, 4, 0).shape() == Shape{0, 5});

  Tensor s = x.slice(1, 0, 5, 2);
  CHECK(s.shape() == Shape{4, 3});
  CHECK(s.strides() == Strides{5, 2});
  CHECK(values(s.select(0, 1)) == std::vector<float>{5, 7, 9});
  CHECK(values(x.slice(1, -2, 5).select(0, 0)) == std::vector<float>{3, 4});  // negative start
  CHECK(values(x.slice(1, 1, -1).select(0, 0)) == std::vector<float>{1, 2, 3});  // negative end
  CHECK(x.slice(1, 3, 100).shape() == Shape{4, 2});  // end clamps
  CHECK(x.slice(1, 4, 2).shape() == Shape{4, 0});    // empty, not negative
  CHECK(x.slice(0, 1, 4, 3).shape() == Shape{1, 5});

  Tensor r = x.select(1, -1);
  CHECK(r.shape() == Shape{4});
  CHECK(r.strides() == Strides{5});
  CHECK(values(r) == std::vector<float>{4, 9, 14, 19});
  CHECK(x.select(0, 2).offset() == 10);
  CHECK(r.storage() == x.storage());

  CHECK_THROWS_WITH_AS(x.narrow(1, 3, 3), doctest::Contains("narrow: range [3, 6) is out of bounds for dim 1"),
                       Error);
  CHECK_THROWS_WITH_AS(x.narrow(1, -1, 1), doctest::Contains("narrow"), Error);
  CHECK_THROWS_WITH_AS(x.slice(0, 0, 2, 0), doctest::Contains("slice: step must be positive"), Error);
  CHECK_THROWS_WITH_AS(x.select(0, 4), doctest::Contains("select: index 4 is out of range for dim 0"), Error);
  CHECK_THROWS_WITH_AS(x.select(0, -5), doctest::Contains("select: index -5"), Error);
  CHECK_THROWS_WITH_AS(x.select(2, 0), doctest::Contains("select: dim 2 is out of range"), Error);
}

TEST_CASE("views: expand broadcasts with stride 0") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(e.storage() == x.storage());
  CHECK(x.expand({-1, 2}).shape() == Shape{3, 2});
  CHECK(x.expand({3, 1}).id() == x.id());  // nothing to do: the same tensor
  CHECK(Tensor::scalar(5).expand({2, 2}).strides() == Strides{0, 0});
  CHECK(x.broadcast_to({3, 3}).shape() == Shape{3, 3});
  CHECK(values(e.contiguous().select(0, 1).select(0, 2)) == std::vector<float>{2, 2, 2, 2});
  CHECK_THROWS_WITH_AS(x.expand({3, 2, 2}), doctest::Contains("expand: cannot expand f32[3, 1] on cpu to [3, 2, 2]"),
                       Error);
  CHECK_THROWS_WITH_AS(x.expand({2}), doctest::Contains("fewer dims"), Error);
  CHECK_THROWS_WITH_AS(x.expand({-1, 3, 1}), doctest::Contains("invalid size -1"), Error);
}

TEST_CASE("views: squeeze and unsqueeze keep storage, also on non-contiguous tensors") {
  Tensor x = iota({2, 1, 3});
  CHECK(x.squeeze(1).shape() == Shape{2, 3});
  CHECK(x.squeeze(0).shape() == Shape{2, 1, 3});  // not size 1: unchanged
  CHECK(x.squeeze(-2).shape() == Shape{2, 3});
  CHECK(x.squeeze().shape() == Shape{2, 3});
  CHECK(iota({1, 1}).squeeze().shape() == Shape{});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 1, 3});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 1, 3, 1});
  CHECK(x.unsqueeze(3).shape() == Shape{2, 1, 3, 1});
  CHECK(Tensor::scalar(1).unsqueeze(0).shape() == Shape{1});
  CHECK_THROWS_WITH_AS(x.unsqueeze(5), doctest::Contains("unsqueeze: dim 5 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.squeeze(3), doctest::Contains("squeeze: dim 3 is out of range"), Error);

  Tensor t = iota({3, 1, 2}).transpose(0, 2);  // [2, 1, 3], not contiguous
  Tensor sq = t.squeeze(1), un = t.unsqueeze(1), all = t.squeeze();
  CHECK(sq.storage() == t.storage());
  CHECK(un.storage() == t.storage());
  CHECK(all.storage() == t.storage());
  CHECK(sq.strides() == Strides{1, 2});
  CHECK(values(sq) == values(t.contiguous()));
}

TEST_CASE("views: contiguous is the tensor itself when already contiguous") {
  Tensor x = iota({2, 3});
  CHECK(x.contiguous().id() == x.id());
  Tensor c = x.t().contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.storage() != x.storage());
  CHECK(values(c) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(iota({3, 1}).expand({3, 2}).contiguous().strides() == Strides{2, 1});
  // Size-1 dims do not break contiguity, whatever their stride.
  Tensor odd = make_tensor({2, 1, 3}, {3, 17, 1}, 0, DType::f32, x.storage());
  CHECK(odd.is_contiguous());
  CHECK(odd.contiguous().id() == odd.id());
  // clone always copies.
  CHECK(x.clone().storage() != x.storage());
}

TEST_CASE("views: writes through views reach the base, and views of views compose") {
  Tensor x = Tensor::zeros({3, 4});
  x.t().select(0, 1).fill_(1);                  // column 1
  x.narrow(0, 2, 1).slice(1, 0, 4, 2).fill_(2);  // row 2, even columns
  CHECK(values(x) == std::vector<float>{0, 1, 0, 0, 0, 1, 0, 0, 2, 1, 2, 0});
  x.select(0, 0).copy_(core_test::f32({5, 6, 7, 8}, {4}));
  CHECK(values(x.select(0, 0)) == std::vector<float>{5, 6, 7, 8});
  Tensor v = x.view({2, 6}).transpose(0, 1).narrow(0, 1, 2);  // [2, 2]
  CHECK(values(v.contiguous()) == std::vector<float>{6, 0, 7, 2});
}

TEST_CASE("views: backward of every view (gradcheck)") {
  CHECK(gradcheck_view({2, 3, 4}, [](const Tensor& x) { return x.view({6, 4}); }) == "");
  CHECK(gradcheck_view({2, 3, 4}, [](const Tensor& x) { return x.transpose(0, 2).reshape({-1}); }) == "");
  CHECK(gradcheck_view({2, 3, 4}, [](const Tensor& x) { return x.permute({2, 0, 1}); }) == "");
  CHECK(gradcheck_view({4, 5}, [](const Tensor& x) { return x.narrow(1, 1, 3); }) == "");
  CHECK(gradcheck_view({4, 5}, [](const Tensor& x) { return x.slice(1, 0, 5, 2).slice(0, 1, 4, 2); }) == "");
  CHECK(gradcheck_view({4, 5}, [](const Tensor& x) { return x.select(1, -2); }) == "");
  CHECK(gradcheck_view({3, 1}, [](const Tensor& x) { return x.expand({2, 3, 4}); }) == "");
  CHECK(gradcheck_view({2, 1, 3}, [](const Tensor& x) { return x.squeeze(1); }) == "");
  CHECK(gradcheck_view({2, 1, 3}, [](const Tensor& x) { return x.squeeze(); }) == "");
  CHECK(gradcheck_view({2, 3}, [](const Tensor& x) { return x.unsqueeze(1); }) == "");
  CHECK(gradcheck_view({3, 4}, [](const Tensor& x) { return x.t().contiguous(); }) == "");
  CHECK(gradcheck_view({3, 4}, [](const Tensor& x) { return x.clone(); }) == "");
  CHECK(gradcheck_view({3, 4}, [](const Tensor& x) { return x.t().narrow(0, 1, 2).reshape({-1}); }) == "");
  CHECK(gradcheck_view({3, 4}, [](const Tensor& x) { return x.detach().requires_grad() ? x : x * 2.0; }) == "");
}

TEST_CASE("views: backward values of each view") {
  // w = 1, 2, 3, ... over the view's elements, so each input element's gradient names the
  // view position(s) it was seen at.
  CHECK(grad_of({2, 3}, [](const Tensor& x) { return x.t(); }) == std::vector<float>{1, 3, 5, 2, 4, 6});
  CHECK(grad_of({2, 3}, [](const Tensor& x) { return x.select(1, 1); }) == std::vector<float>{0, 1, 0, 0, 2, 0});
  CHECK(grad_of({1, 4}, [](const Tensor& x) { return x.slice(1, 1, 4, 2); }) == std::vector<float>{0, 1, 0, 2});
  CHECK(grad_of({2, 1}, [](const Tensor& x) { return x.expand({2, 3}); }) == std::vector<float>{6, 15});
  CHECK(grad_of({3}, [](const Tensor& x) { return x.expand({2, 3}); }) == std::vector<float>{5, 7, 9});
  // One input seen through two overlapping views: the gradients add.
  CHECK(grad_of({4}, [](const Tensor& x) { return cat({x.narrow(0, 0, 3), x.narrow(0, 1, 3)}); }) ==
        std::vector<float>{1, 2 + 4, 3 + 5, 6});
}
