// Muon (MomentUm Orthogonalized by Newton-Schulz, Keller Jordan 2024), following torch.optim.Muon
// (PyTorch 2.9, torch/optim/_muon.py, _single_tensor_muon) step for step. Defaults are PyTorch's:
// lr 1e-3, weight_decay 0.1, momentum 0.95, nesterov true, ns_coefficients (3.4445, -4.775,
// 2.0315), eps 1e-7, ns_steps 5, adjust_lr_fn null, and use_addmm true (see below).
//
// One step of a parameter p (a matrix of `rows` x `cols`) with gradient g:
//
//   buf = lerp(buf, g, 1 - momentum)                      (buf = momentum buf + (1 - momentum) g)
//   u   = nesterov ? lerp(g, buf, momentum) : buf
//   O   = NewtonSchulz(u)                                 (bf16; below)
//   p  *= 1 - lr weight_decay                             (decoupled decay, with the unadjusted lr)
//   p  -= adjusted_lr O
//
// adjusted_lr: adjust_lr_fn null or "original" (Keller Jordan's): lr sqrt(max(1, rows / cols));
// "match_rms_adamw" (Moonshot's): lr 0.2 sqrt(max(rows, cols)). PyTorch treats null as "original",
// and so does lathe.
//
// NewtonSchulz(u) with (a, b, c) = ns_coefficients, all in bf16: X = u rounded to bf16, transposed
// when rows > cols; X /= max(||X||_F, eps) (the norm itself rounded to bf16, as PyTorch's bf16 norm
// is); then ns_steps times
//
//   A = X X^T;  B = b A + c A A;  X = a X + B X
//
// and X transposed back. Every product multiplies bf16 values with f32 accumulation and rounds its
// result to bf16 once, as a GPU's bf16 matmul does. PyTorch 2.9 computes B and the new X each as
// one addmm (the scaled sum joins the product before that one rounding); lathe does the same:
// it multiplies the (exactly widened) bf16 values in f32 and rounds the sum. PyTorch's main branch
// makes this a choice, use_addmm (default false there), whose other form rounds each term to bf16
// before the sum: b * A, (c * A) @ A, a * X and B @ X; lathe's use_addmm false does exactly that,
// scaling by the coefficients in f32 as a GPU does (lathe's own tensor-scalar ops on 16-bit tensors
// round the scalar to 16 bits first, torch 1.13's CPU rule, which would make b -4.78125).
// Summation order is the backend's (lathe's own f32 kernel on the CPU, cuBLAS on a GPU), so an
// intermediate may round to the other bf16 neighbour of PyTorch's, rarely for short rows, and
// the iteration amplifies such a difference: the quintic's slope at zero is a = 3.4445 per step,
// about 480 over five, so one bf16 ulp of one input element moves most output elements, by up to
// several percent (tests/golden/make_muon_goldens.py's cases agree within relative 1e-3 because
// their intermediates agree bit for bit). PyTorch's own CPU bf16 products may differ more: torch 1.13's CPU gemm rounds small
// products' partial sums to bf16 (checked: 4x3 @ 3x4 differs from f32-then-round in 5 of 16
// elements), so the goldens emulate a GPU's arithmetic instead (tests/golden/muon_reference.py).
//
// lerp is torch.lerp: start + w (end - start) for |w| < 0.5, else end - (end - start)(1 - w), in
// the parameter's compute type. PyTorch evaluates each form as one fused multiply-add; lathe rounds
// the product first, so momentum buffers may differ from PyTorch's in the last f32 bit.
//
// Only matrices: a parameter that is not 2-D is refused when its group is added, naming it and its
// shape (Muon is for hidden layers; embeddings, heads, gains and biases take AdamW beside it:
// optim/composite.h, train/muon_groups.h). ns_steps must be in [1, 100) (PyTorch refuses 100 and
// more), every number finite, eps > 0.
//
// State (PyTorch key): momentum_buffer, with the parameter (f32 for 16-bit parameters), created
// as zeros at the parameter's first gradient. Muon has only this plain path.
#pragma once

#include <array>

#include "optim/optimizer.h"

namespace lathe::optim {

// adjust_lr_fn: null (PyTorch's None, which scales as "original"), "original", "match_rms_adamw".
enum class MuonLrAdjust : uint8_t { none, original, match_rms_adamw };

// Hyperparameters of one group; JSON (PyTorch) names in muon.cpp's option list.
struct MuonOptions {
  double lr, weight_decay, momentum;
  bool nesterov;
  std::array<double, 3> ns_coefficients;  // (a, b, c)
  double eps;
  int64_t ns_steps;
  MuonLrAdjust adjust_lr_fn;
  bool use_addmm;
};

class Muon : public TypedOptimizer<MuonOptions> {
 public:
  // Without parameters: add them with add_param_group. `defaults` override PyTorch's.
  explicit Muon(const nlohmann::json& defaults = {});
  Muon(const std::vector<Tensor>& params, const nlohmann::json& options = {});
  std::string kind() const override { return "muon"; }

 protected:
  void check_param(const Tensor& p, const std::string& what) const override;
  void update() override;

 private:
  ParamState<> momentum_buffer_{*this, "momentum_buffer"};
};

// The Newton-Schulz orthogonalisation of one update matrix, as Muon's step computes it (bf16, the
// shape of `update`).
Tensor muon_orthogonalize(const Tensor& update, const MuonOptions& o);

// The learning rate Muon applies to a rows x cols parameter.
double muon_adjusted_lr(double lr, MuonLrAdjust adjust, int64_t rows, int64_t cols);

}  // namespace lathe::optim
