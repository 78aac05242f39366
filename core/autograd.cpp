#include "core/autograd.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/grad_ready_hook.h"
#include "core/ops.h"

namespace lathe {

namespace {
thread_local bool t_grad_enabled = true;
thread_local GradReadyFn t_grad_ready;  // empty: no hook (the usual case)
}  // namespace

GradReadyHook::GradReadyHook(GradReadyFn fn) : previous_(std::move(t_grad_ready)) { t_grad_ready = std::move(fn); }
GradReadyHook::~GradReadyHook() { t_grad_ready = std::move(previous_); }

void notify_grad_ready(const Tensor& leaf, const Tensor& grad) {
  if (t_grad_ready) t_grad_ready(leaf, grad);
}

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {
// Freeing a graph. A node owns the edges to its inputs' nodes, which own theirs, and so on:
// letting destructors chain would recurse once per node and overflow the stack on a long graph (a
// loss summed over many steps). Instead the first node freed on a thread collects the edge lists
// of every node freed while it runs, and releases them one list at a time.
thread_local std::vector<std::vector<Edge>>* t_pending_inputs = nullptr;

void delete_node(Node* node) {
  if (t_pending_inputs) {  // inside a release: hand the edges to the loop below
    t_pending_inputs->push_back(std::move(node->inputs));
    delete node;
    return;
  }
  std::vector<std::vector<Edge>> pending;
  t_pending_inputs = &pending;
  pending.push_back(std::move(node->inputs));
  delete node;
  while (!pending.empty()) {
    std::vector<Edge> inputs = std::move(pending.back());
    pending.pop_back();
    inputs.clear();  // may free more nodes, which append to `pending`
  }
  t_pending_inputs = nullptr;
}

// Where a gradient for `t` goes: the node that made it, or the leaf itself; empty when it needs none.
Edge edge_to(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), nullptr, t.shape()};
  return {nullptr, t.impl_ptr(), t.shape()};
}
}  // namespace

namespace {
Tensor attach(const char* name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward,
              FoldingBackwardFn folding) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& in : inputs) edges.push_back(edge_to(in));
  std::shared_ptr<Node> node(new Node{name, std::move(edges), std::move(backward), std::move(folding)}, delete_node);
  out.impl_ptr()->grad_fn = std::move(node);
  out.impl_ptr()->requires_grad = true;
  return out;
}
}  // namespace

Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!needs_grad(inputs)) return out;
  return attach(name, std::move(out), inputs, std::move(backward), nullptr);
}

Tensor record_folding(const char* name, Tensor out, std::vector<Tensor> inputs, FoldingBackwardFn backward) {
  if (!needs_grad(inputs)) return out;
  return attach(name, std::move(out), inputs, nullptr, std::move(backward));
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  size_t lead = grad.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < grad.shape().size(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && grad.shape()[i] != 1)) dims.push_back(int64_t(i));
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  LATHE_CHECK(root.requires_grad(), "backward: the tensor ", root.desc(),
              " does not require grad and has no grad_fn");
  Tensor grad = grad_in;
  if (!grad.defined()) {
    LATHE_CHECK(root.numel() == 1, "backward: grad can be implicitly created only for one-element ",
                "outputs; pass a gradient for ", root.desc());
    grad = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  LATHE_CHECK(grad.shape() == root.shape(), "backward: gradient ", grad.desc(),
              " does not match the output ", root.desc());

  // Topological order over the graph's vertices (nodes, and the leaves that want gradients) by
  // depth-first search, iterative so that deep graphs do not overflow the stack. `order` keeps
  // each vertex alive until its own turn below, then lets it go: a node and what its backward
  // saved are freed as soon as it has run, not when the whole backward ends.
  std::vector<Edge> order;
  std::unordered_set<const void*> visited;
  struct Frame { Edge edge; size_t next; };
  std::vector<Frame> stack{{edge_to(root), 0}};
  visited.insert(stack.back().edge.vertex());
  while (!stack.empty()) {
    Frame& f = stack.back();
    Node* node = f.edge.node.get();
    if (node && f.next < node->inputs.size()) {
      const Edge& in = node->inputs[f.next++];
      if (in.defined() && visited.insert(in.vertex()).second) stack.push_back({in, 0});
      continue;
    }
    order.push_back(std::move(f.edge));
    stack.pop_back();
  }

  NoGradGuard no_grad;  // backward rules build no graph of their own
  std::unordered_map<const void*, Tensor> grads;
  grads[order.back().vertex()] = grad;
  for (size_t i = order.size(); i-- > 0;) {
    // Released at the end of this iteration: every node that sends it a gradient came earlier.
    const Edge self = std::move(order[i]);
    auto it = grads.find(self.vertex());
    if (it == grads.end()) continue;
    Tensor g = std::move(it->second);
    grads.erase(it);
    if (self.leaf) {
      // A leaf: accumulate into .grad, which owns its memory. A gradient a backward rule made for
      // this leaf alone (a weight gradient's product, a bias gradient's sum) becomes it as it is;
      // anything else (the incoming gradient passed through by add, a view, one tensor returned for
      // two inputs, the caller's own tensor) is copied, so that .grad shares memory with nothing.
      TensorImpl& leaf = *self.leaf;
      if (!leaf.requires_grad) continue;  // turned off since the forward
      if (!leaf.grad) {
        leaf.grad = owns_its_memory(g) ? g.impl_ptr() : g.clone().impl_ptr();
      } else {
        Tensor acc(leaf.grad);
        acc.copy_(add(acc, g));
      }
      // Every contribution reached this leaf before it in reverse topological order: final.
      if (t_grad_ready) notify_grad_ready(Tensor(self.leaf), Tensor(leaf.grad));
      continue;
    }
    Node& node = *self.node;
    LATHE_CHECK(node.backward || node.folding, "backward: the graph through '", node.name,
                "' was already freed; pass retain_graph=true to backward twice");
    std::vector<Tensor> gin;
    if (node.folding) {
      // Whatever has reached the first input so far leaves the map and comes back inside this
      // node's gradient for it; a contribution arriving later is added as usual.
      Tensor gathered;
      if (!node.inputs.empty() && node.inputs[0].defined()) {
        if (auto pending = grads.find(node.inputs[0].vertex()); pending != grads.end()) {
          gathered = std::move(pending->second);
          grads.erase(pending);
        }
      }
      gin = node.folding(g, gathered);
      if (!gin.empty() && !gin[0].defined()) gin[0] = std::move(gathered);  // it gave none: keep ours
    } else {
      gin = node.backward(g);
    }
    g = Tensor();  // the output's gradient, often the largest tensor alive here
    LATHE_CHECK(gin.size() == node.inputs.size(), "backward of '", node.name, "' returned ",
                gin.size(), " gradients for ", node.inputs.size(), " inputs");
    for (size_t k = 0; k < gin.size(); ++k) {
      const Edge& in = node.inputs[k];
      if (!in.defined() || !gin[k].defined()) continue;
      LATHE_CHECK(gin[k].shape() == in.shape, "backward of '", node.name, "': gradient ",
                  gin[k].desc(), " for input ", k, " does not match its shape ", shape_str(in.shape));
      auto [slot, fresh] = grads.try_emplace(in.vertex(), std::move(gin[k]));
      if (!fresh) slot->second = add(slot->second, gin[k]);
    }
    if (!retain_graph) {
      node.backward = nullptr;
      node.folding = nullptr;
      node.inputs.clear();
    }
  }
}

std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                      const std::vector<Tensor>& inputs_in, const GradcheckOptions& opt) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : inputs_in) {
    if (t.requires_grad()) {
      LATHE_CHECK(t.dtype() == DType::f64, "gradcheck: inputs that require grad must be f64, got ",
                  t.desc());
      inputs.push_back(t.detach().clone().requires_grad_(true));
    } else {
      inputs.push_back(t);
    }
  }
  Tensor out0 = f(inputs);
  // A fixed random projection makes the scalar objective sensitive to every output element.
  Tensor w = Tensor::randn(out0.shape(), /*seed=*/1234, 0, DType::f64, out0.device());
  auto objective = [&](const std::vector<Tensor>& xs) { return sum(mul(f(xs), w)).item(); };

  Tensor loss = sum(mul(out0, w));
  loss.backward();

  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    Tensor analytic = inputs[k].grad().defined() ? inputs[k].grad().to(Device::cpu())
                                                  : Tensor::zeros(inputs[k].shape(), DType::f64);
    std::vector<double> an = analytic.contiguous().to_vector<double>();
    Tensor host = inputs[k].detach().to(Device::cpu()).contiguous();
    int64_t n = host.numel();
    for (int64_t e = 0; e < n; ++e) {
      auto eval_at = [&](double delta) {
        Tensor h = host.clone();
        h.data<double>()[e] += delta;
        std::vector<Tensor> xs = inputs;
        xs[k] = h.to(inputs[k].device());
        NoGradGuard ng;
        return objective(xs);
      };
      double numeric = (eval_at(opt.eps) - eval_at(-opt.eps)) / (2 * opt.eps);
      double a = an[size_t(e)];
      if (!(std::abs(a - numeric) <= opt.atol + opt.rtol * std::abs(numeric))) {
        return detail::cat("gradcheck: input ", k, " ", inputs[k].desc(), " element ", e,
                           ": analytic ", a, " vs numeric ", numeric);
      }
    }
  }
  return "";
}

}  // namespace lathe
