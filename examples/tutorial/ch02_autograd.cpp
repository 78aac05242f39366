// Chapter 2 of the tutorial (docs/tutorial/02-autograd.md): a graph by hand, backward, and a
// gradient checked by finite differences.
#include <cstdio>
#include <iostream>

#include "core/autograd.h"
#include "core/ops.h"
#include "tutorial.h"

using namespace lathe;

int main() {
  std::cout << std::boolalpha;
  tutorial::part("graph");
  // [tutorial:graph]
  // loss = sum((w * x + b)^2), with w and b leaves that require gradients.
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  Tensor w = Tensor::from_vector<double>({0.5, -1, 2}, {3}).requires_grad_();
  Tensor b = Tensor::scalar(1.0, DType::f64).requires_grad_();
  Tensor z = w * x + b;          // mul, then add (b broadcast to [3])
  Tensor loss = sum(square(z));
  std::cout << "z    " << z << "\n";
  std::cout << "loss " << loss << "\n";
  // Every op recorded a Node: its name, its inputs and its backward rule.
  for (const Tensor* t : {&loss, &z, &w})
    std::cout << (t == &loss ? "loss" : t == &z ? "z   " : "w   ") << " made by "
              << (t->grad_fn() ? t->grad_fn()->name : "(a leaf)") << "\n";
  // [/tutorial:graph]

  tutorial::part("backward");
  // [tutorial:backward]
  loss.backward();               // d loss / d loss = 1, then the nodes in reverse order
  std::cout << "dw " << w.grad() << "\n";
  std::cout << "db " << b.grad() << "\n";
  // By hand: d loss / d z = 2 z, so dw = 2 z * x and db = sum(2 z).
  Tensor zd = z.detach();
  std::cout << "2zx " << zd * x * 2.0 << "\n";
  std::cout << "sum(2z) " << sum(zd * 2.0) << "\n";
  // [/tutorial:backward]

  tutorial::part("finite-differences");
  // [tutorial:finite-differences]
  // The same derivative by central differences: nudge w[1] by +-h and rerun the forward.
  auto f = [&](double w1) {
    Tensor wv = Tensor::from_vector<double>({0.5, w1, 2}, {3});
    return sum(square(wv * x + b.detach())).item();
  };
  const double h = 1e-6;
  const double numeric = (f(-1 + h) - f(-1 - h)) / (2 * h);
  std::printf("dloss/dw[1]: backward %.6f, finite differences %.6f\n", w.grad().to_vector<double>()[1],
              numeric);
  // lathe::gradcheck does this for every element of every input.
  std::string fault = gradcheck(
      [](const std::vector<Tensor>& v) { return square(v[0] * v[1] + v[2]); },
      {x, w.detach().requires_grad_(), b.detach().requires_grad_()});
  std::cout << "gradcheck: " << (fault.empty() ? "every gradient matches" : fault) << "\n";
  // [/tutorial:finite-differences]

  tutorial::part("accumulate");
  // [tutorial:accumulate]
  // Gradients add up in .grad until someone clears them (an optimizer's zero_grad does).
  sum(w * 3.0).backward();
  std::cout << "dw after a second backward " << w.grad() << "\n";
  w.set_grad(Tensor());
  std::cout << "after set_grad(Tensor()): defined " << w.grad().defined() << "\n";
  {
    NoGradGuard no_grad;         // evaluation and optimizer steps record nothing
    Tensor y = w * 2.0;
    std::cout << "under NoGradGuard: requires_grad " << y.requires_grad() << "\n";
  }
  // [/tutorial:accumulate]
  return 0;
}
