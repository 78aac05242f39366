// Autograd edge cases: a tensor used twice, diamonds, backward twice, no_grad, detach, integer
// tensors, accumulation over backward calls, leaf gradients that never alias, deep graphs, what a
// node keeps alive.
#include <functional>
#include <memory>
#include <utility>

#include <doctest/doctest.h>

#include "core_test_util.h"

using namespace lathe;

namespace {
Tensor vec(const std::vector<double>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("autograd: a tensor used twice gets both gradients") {
  Tensor x = vec({1, 2, 3}).requires_grad_(true);
  sum(mul(x, x)).backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 4, 6});

  Tensor y = vec({1, 2}).requires_grad_(true);
  sum(add(y, y)).backward();
  CHECK(values(y.grad()) == std::vector<double>{2, 2});

  // The same tensor in two argument slots of cat and of where.
  Tensor z = vec({5, 7}).requires_grad_(true);
  sum(mul(cat({z, z, z}), vec({1, 2, 3, 4, 5, 6}))).backward();
  CHECK(values(z.grad()) == std::vector<double>{1 + 3 + 5, 2 + 4 + 6});
}

TEST_CASE("autograd: a diamond sums the gradients of both paths") {
  Tensor x = vec({0.5, -1.0}).requires_grad_(true);
  Tensor a = mul(x, 2.0);  // path 1
  Tensor b = exp(x);       // path 2
  sum(mul(a, b)).backward();
  std::vector<double> g = values(x.grad());
  for (size_t i = 0; i < 2; ++i) {
    double xv = i == 0 ? 0.5 : -1.0;
    CHECK(g[i] == doctest::Approx(2 * std::exp(xv) + 2 * xv * std::exp(xv)));
  }
  // A wider diamond: z feeds three branches that meet again, with a shared intermediate.
  Tensor w = Tensor::randn({3, 4}, 1, 0, DType::f64).requires_grad_(true);
  auto f = [](const std::vector<Tensor>& v) {
    Tensor z = tanh(v[0]);
    Tensor p = mul(z, z), q = sigmoid(z), r = sum(z, {1}, true);
    return add(add(mul(p, q), r), mul(z, r));
  };
  CHECK(gradcheck(f, {w}) == "");
}

TEST_CASE("autograd: backward twice needs retain_graph") {
  Tensor x = vec({1, 2}).requires_grad_(true);
  Tensor y = sum(exp(x));
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("already freed; pass retain_graph=true"), Error);

  Tensor x2 = vec({1, 2}).requires_grad_(true);
  Tensor y2 = sum(mul(exp(x2), x2));
  y2.backward(Tensor(), /*retain_graph=*/true);
  std::vector<double> once = values(x2.grad());
  y2.backward();  // allowed once more; gradients accumulate
  std::vector<double> twice = values(x2.grad());
  for (size_t i = 0; i < 2; ++i) CHECK(twice[i] == doctest::Approx(2 * once[i]));
  CHECK_THROWS_AS(y2.backward(), Error);  // now the graph is freed
}

TEST_CASE("autograd: no_grad records nothing and restores the previous mode") {
  Tensor x = vec({1, 2}).requires_grad_(true);
  CHECK(grad_enabled());
  {
    NoGradGuard ng;
    CHECK_FALSE(grad_enabled());
    Tensor y = mul(x, 3.0);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    CHECK(y.is_leaf());
    {
      NoGradGuard inner;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());  // the inner guard restores "off", not "on"
    CHECK_THROWS_WITH_AS(sum(y).backward(), doctest::Contains("does not require grad"), Error);
  }
  CHECK(grad_enabled());
  Tensor z = mul(x, 3.0);
  CHECK(z.requires_grad());
  CHECK(z.grad_fn() != nullptr);
  CHECK(std::string(z.grad_fn()->name) == "mul");
}

TEST_CASE("autograd: detach shares storage and cuts the graph") {
  Tensor x = vec({1, 2, 3}).requires_grad_(true);
  Tensor h = mul(x, 2.0);
  Tensor d = h.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.storage() == h.storage());
  // Only the non-detached path contributes.
  sum(add(mul(h, d), x)).backward();
  CHECK(values(x.grad()) == std::vector<double>{2 * 2 + 1, 4 * 2 + 1, 6 * 2 + 1});
  // A detached tensor may start its own graph.
  Tensor e = x.detach().requires_grad_(true);
  sum(square(e)).backward();
  CHECK(values(e.grad()) == std::vector<double>{2, 4, 6});
  CHECK(values(x.grad()) == std::vector<double>{5, 9, 13});  // untouched
}

TEST_CASE("autograd: only floating tensors require grad, integer results carry none") {
  CHECK_THROWS_WITH_AS(Tensor::ones({2}, DType::i64).requires_grad_(),
                       doctest::Contains("requires_grad_: only floating tensors can require gradients, got i64[2]"),
                       Error);
  CHECK_THROWS_AS(Tensor::ones({2}, DType::i32).requires_grad_(), Error);
  CHECK_THROWS_AS(Tensor::ones({2}, DType::b8).requires_grad_(), Error);
  Tensor::ones({2}, DType::i64).requires_grad_(false);  // turning it off is always fine
  Tensor x = vec({1.5, -2.5}).requires_grad_(true);
  CHECK_FALSE(x.to(DType::i64).requires_grad());
  CHECK_FALSE(gt(x, x).requires_grad());
  CHECK_FALSE(argmax(x, 0).requires_grad());
  CHECK(x.to(DType::f32).requires_grad());
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(y.requires_grad_(false), doctest::Contains("non-leaf"), Error);
}

TEST_CASE("autograd: .grad accumulates over backward calls and can be cleared") {
  Tensor x = vec({1, 2}).requires_grad_(true);
  sum(mul(x, 3.0)).backward();
  Tensor first = x.grad();
  sum(mul(x, x)).backward();
  CHECK(values(x.grad()) == std::vector<double>{3 + 2, 3 + 4});
  CHECK(x.grad().id() == first.id());  // accumulated in place, as torch
  x.set_grad(Tensor());
  CHECK_FALSE(x.grad().defined());
  sum(x).backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 1});
  CHECK_THROWS_WITH_AS(x.set_grad(Tensor::zeros({3}, DType::f64)), doctest::Contains("set_grad: gradient"), Error);
  // Intermediate tensors keep no gradient; leaves that are not reached keep none either.
  Tensor a = vec({1}).requires_grad_(true), unused = vec({1}).requires_grad_(true);
  Tensor mid = mul(a, 2.0);
  sum(mid).backward();
  CHECK_FALSE(mid.grad().defined());
  CHECK_FALSE(unused.grad().defined());
}

TEST_CASE("autograd: leaf gradients never alias each other or the incoming gradient") {
  // add's backward hands the same tensor to both inputs.
  Tensor a = vec({1, 2}).requires_grad_(true), b = vec({3, 4}).requires_grad_(true);
  sum(add(a, b)).backward();
  CHECK(a.grad().storage() != b.grad().storage());
  a.grad().fill_(100);
  CHECK(values(b.grad()) == std::vector<double>{1, 1});

  // A gradient passed to backward stays the caller's.
  Tensor x = vec({1, 2, 3, 4}).requires_grad_(true);
  Tensor g = Tensor::from_vector<double>({1, 1, 1, 1}, {2, 2});
  x.view({2, 2}).backward(g);
  CHECK(x.grad().storage() != g.storage());
  x.grad().fill_(7);
  CHECK(values(g) == std::vector<double>{1, 1, 1, 1});

  // Views of one leaf and clones: separate gradient memory for separate leaves.
  Tensor p = vec({1, 2}).requires_grad_(true), q = vec({1, 2}).requires_grad_(true);
  sum(add(p.expand({3, 2}), q.expand({3, 2}))).backward();
  CHECK(p.grad().storage() != q.grad().storage());
  CHECK(values(p.grad()) == std::vector<double>{3, 3});

  // A fresh gradient (a product's) becomes .grad as it is; the next backward accumulates into it
  // and leaves the graph's own tensors alone.
  Tensor xm = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  Tensor w = Tensor::from_vector<double>({1, 0, 0, 1}, {2, 2}).requires_grad_(true);
  Tensor loss = sum(matmul(xm, w));
  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values(w.grad()) == std::vector<double>{4, 4, 6, 6});
  loss.backward();
  CHECK(values(w.grad()) == std::vector<double>{8, 8, 12, 12});
  CHECK(values(xm) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("autograd: backward argument checks") {
  Tensor x = vec({1, 2}).requires_grad_(true);
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("grad can be implicitly created only for one-element"), Error);
  CHECK_THROWS_WITH_AS(y.backward(vec({1, 2, 3})), doctest::Contains("does not match the output"), Error);
  CHECK_THROWS_WITH_AS(vec({1}).backward(), doctest::Contains("does not require grad"), Error);
  y.backward(vec({1, 10}));
  CHECK(values(x.grad()) == std::vector<double>{2, 20});
}

TEST_CASE("autograd: deep graphs neither overflow the stack nor leak") {
  Tensor x = vec({0.5}).requires_grad_(true);
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = add(mul(y, 1.0), 0.0);
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{1});
  // Dropping the last reference frees the whole chain (this must not recurse once per node, which
  // would overflow the stack): every tensor the chain holds goes back to the allocator.
  const size_t before = memory_stats(Device::cpu()).allocated;
  Tensor z = x;
  for (int i = 0; i < 200000; ++i) z = mul(z, 1.0);
  CHECK(memory_stats(Device::cpu()).allocated >= before + 200000 * sizeof(float));  // one element each, at least
  z = Tensor();
  CHECK(memory_stats(Device::cpu()).allocated == before);
}

TEST_CASE("autograd: a node holds no input's data, only what its backward reads, until it runs") {
  Tensor w = vec({1, 2, 3}).requires_grad_(true);
  // add's backward reads shapes only: an intermediate it adds is freed with the forward's locals.
  std::weak_ptr<Storage> added;
  Tensor y;
  {
    Tensor a = mul(w, 2.0);
    added = a.storage();
    y = add(a, w);
  }
  CHECK(added.expired());
  // mul's backward reads both operands: the intermediate lives until that backward has run.
  std::weak_ptr<Storage> multiplied;
  Tensor z;
  {
    Tensor b = mul(y, 1.0);
    multiplied = b.storage();
    z = mul(b, b);
  }
  CHECK_FALSE(multiplied.expired());
  sum(z).backward();
  CHECK(multiplied.expired());
  // z = (3w)^2: dz/dw = 18 w.
  CHECK(values(w.grad()) == std::vector<double>{18, 36, 54});
}

TEST_CASE("autograd: sum_to inverts broadcasting") {
  Tensor g = Tensor::ones({2, 3, 4}, DType::f64);
  CHECK(values(sum_to(g, {3, 1})) == std::vector<double>{8, 8, 8});
  CHECK(sum_to(g, {1, 4}).shape() == Shape{1, 4});
  CHECK(values(sum_to(g, {})) == std::vector<double>{24});
  CHECK(sum_to(g, {2, 3, 4}).id() == g.id());
}

TEST_CASE("autograd: binary ops and where give gradients only to inputs that require them") {
  // The operand that needs no gradient may be an integer or a bool tensor: no gradient is formed
  // for it (none could be cast back to its dtype meaningfully), and the other one still gets its own.
  Tensor x = vec({1, 2, 4}).requires_grad_(true);
  Tensor n = Tensor::from_vector(std::vector<int64_t>{3, 1, 2}, {3});
  Tensor c = vec({2, 2, 2});
  const std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
      {"add", [&] { return add(n, x); }},          {"sub", [&] { return sub(c, x); }},
      {"mul", [&] { return mul(x, n); }},          {"div", [&] { return div(n, x); }},
      {"pow", [&] { return pow(c, x); }},          {"maximum", [&] { return maximum(x, c); }},
      {"minimum", [&] { return minimum(c, x); }},  {"where", [&] { return where(gt(n, Tensor::scalar(1.5)), x, c); }},
  };
  for (const auto& [name, f] : cases) {
    CAPTURE(name);
    x.set_grad(Tensor());
    sum(f()).backward();
    CHECK(x.grad().defined());
    CHECK_FALSE(n.grad().defined());
    CHECK_FALSE(c.grad().defined());
  }
  x.set_grad(Tensor());
  sum(sub(c, x)).backward();
  CHECK(values(x.grad()) == std::vector<double>{-1, -1, -1});
  x.set_grad(Tensor());
  sum(where(gt(n, Tensor::scalar(1.5)), x, c)).backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 1});
}
