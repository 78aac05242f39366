// Chapter 3 of the tutorial (docs/tutorial/03-new-op.md): a new differentiable op, softplus, written
// with lathe's autograd API outside core, and checked by finite differences in float64.
#include <cstdio>
#include <iostream>

#include "core/autograd.h"
#include "core/ops.h"
#include "tutorial.h"

using namespace lathe;

// [tutorial:softplus]
// softplus(x) = log(1 + exp(x)), computed as max(x, 0) + log(1 + exp(-|x|)) so that a large x does
// not overflow exp. Its derivative is sigmoid(x).
Tensor softplus(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard no_grad;  // the forward's own ops record nothing: the op is one node
    Tensor xd = x.detach();
    y = relu(xd) + log(exp(-abs(xd)) + 1.0);
  }
  // One node: its name, its inputs, and the rule from d loss / d y to d loss / d x. The rule
  // captures x.detach(), never y itself (that would be a reference cycle).
  return record("softplus", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{g * sigmoid(x)};
  });
}
// [/tutorial:softplus]

// [tutorial:wrong]
// The same op with a mistake in its backward: the derivative of log(1 + e^x) is not e^x.
Tensor softplus_wrong(const Tensor& x) {
  Tensor y = softplus(x.detach());
  return record("softplus_wrong", y, {x}, [x = x.detach()](const Tensor& g) {
    return std::vector<Tensor>{g * exp(x)};
  });
}
// [/tutorial:wrong]

int main() {
  std::cout << std::boolalpha;
  tutorial::part("forward");
  // [tutorial:forward]
  Tensor x = Tensor::from_vector<double>({-30, -1, 0, 1, 30}, {5}).requires_grad_();
  Tensor y = softplus(x);
  std::cout << "y  " << y << "\n";
  std::cout << "made by " << y.grad_fn()->name << ", inputs " << y.grad_fn()->inputs.size() << "\n";
  sum(y).backward();
  std::cout << "dx " << x.grad() << "\n";
  std::cout << "sigmoid(x) " << sigmoid(x.detach()) << "\n";
  // [/tutorial:forward]

  tutorial::part("gradcheck");
  // [tutorial:gradcheck]
  // Random float64 inputs of two shapes; gradcheck compares d sum(f(x) * r) / dx with central
  // differences for a fixed random r.
  for (Shape s : {Shape{7}, Shape{3, 4}}) {
    Tensor in = (Tensor::randn(s, /*seed=*/3, 0, DType::f64) * 3.0).requires_grad_();
    std::string right = gradcheck([](const std::vector<Tensor>& v) { return softplus(v[0]); }, {in});
    std::string wrong = gradcheck([](const std::vector<Tensor>& v) { return softplus_wrong(v[0]); }, {in});
    std::cout << "shape " << shape_str(s) << ": softplus " << (right.empty() ? "passes" : right) << "\n";
    std::cout << "shape " << shape_str(s) << ": softplus_wrong " << (wrong.empty() ? "passes" : "fails") << "\n";
  }
  // [/tutorial:gradcheck]

  tutorial::part("composite");
  // [tutorial:composite]
  // A composite of lathe's ops needs no backward at all: each op records its own node. It costs
  // one node (and one saved tensor) per op instead of one for the whole function.
  Tensor xc = Tensor::from_vector<double>({-1, 0, 1}, {3}).requires_grad_();
  Tensor yc = log(exp(xc) + 1.0);
  sum(yc).backward();
  std::cout << "composite dx " << xc.grad() << "\n";
  // [/tutorial:composite]
  return 0;
}
