// Reverse-mode autograd, small enough to hold in one's head (micrograd's shape, tensor-valued).
//
// An op that wants gradients calls `record(out, {inputs...}, backward_fn)`. If gradients are
// enabled and some input requires them, `out` gets a Node holding the inputs and the rule that
// maps the gradient of `out` to one gradient per input. `Tensor::backward` walks the nodes in
// reverse topological order, sums the gradients that reach each tensor, and accumulates into the
// `.grad` of leaves that require gradients.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lathe {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;
// A backward that also takes the gradient gathered so far for its first input (undefined if none
// has arrived) and returns, for that input, the sum of it and its own: the norm of the residual
// stream adds the stream's gradient in the pass that computes its own, where autograd would add
// the two in a separate pass.
using FoldingBackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out, const Tensor& gathered)>;

struct Node;

// What a node keeps of one input: where its gradient goes, never its data. An op's output is
// reached through the node that made it, so that its memory goes as soon as nothing else holds it
// (a backward rule that reads it, the caller); a leaf that requires grad is kept itself, for its
// .grad (a parameter outlives the graph anyway). An input that needs no gradient is empty.
struct Edge {
  std::shared_ptr<Node> node;        // the op that made the input
  std::shared_ptr<TensorImpl> leaf;  // or the input itself, a leaf
  Shape shape;                       // the shape its gradient must have

  bool defined() const { return node || leaf; }
  const void* vertex() const { return node ? static_cast<const void*>(node.get()) : leaf.get(); }
};

struct Node {
  const char* name;          // the op, for error messages and debugging
  std::vector<Edge> inputs;  // one entry per input; the backward returns grads in this order
  BackwardFn backward;       // returns one grad per input (undefined: no gradient)
  FoldingBackwardFn folding;  // or this, which folds in the first input's gathered gradient
};

// Gradient mode is per thread. NoGradGuard turns it off for a scope (optimizer steps, eval).
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// True when an op with these inputs should record a node.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Attaches a node to `out` if needed; returns `out`. The node holds no input's data: a backward
// captures exactly what it reads (detached), and nothing else, so that the rest is freed with the
// forward's locals. It must not capture `out` itself (a reference cycle): `out.detach()` instead.
Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward);
// The same, with a backward that folds in the gradient gathered for inputs[0] (FoldingBackwardFn).
Tensor record_folding(const char* name, Tensor out, std::vector<Tensor> inputs, FoldingBackwardFn backward);

// Backpropagation from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

// Sums `grad` down to `shape` (the inverse of broadcasting); used by every broadcasting backward.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- gradcheck: finite differences in f64 ----
struct GradcheckOptions {
  double eps = 1e-6;   // central difference step
  double atol = 1e-5;
  double rtol = 1e-3;
};
// `f` maps f64 inputs to one tensor. Checks d(sum(f * w))/d(input) for a fixed random w against
// central differences, for every input that requires grad. Returns "" when all match, else a
// message naming the input, the element, and both values.
std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                      const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {});

}  // namespace lathe
