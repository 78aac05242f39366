// Muon as torch.optim.Muon computes it: see muon.h. The transcription follows PyTorch's
// torch/optim/_muon.py as released in 2.9 (_zeropower_via_newtonschulz with addmm, _adjust_lr,
// _single_tensor_muon) and its main branch (read at commit 098e03f9, which adds use_addmm).
#include "optim/muon.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"

namespace lathe::optim {

namespace {

// adjust_lr_fn: JSON null or one of two names.
Option<MuonOptions> adjust_lr_option() {
  const std::string name = "adjust_lr_fn";
  return {name, [](MuonOptions& o) { o.adjust_lr_fn = MuonLrAdjust::none; },
          [name](MuonOptions& o, const nlohmann::json& v, const char* opt) {
            if (v.is_null()) {
              o.adjust_lr_fn = MuonLrAdjust::none;
              return;
            }
            const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
            LATHE_CHECK(v.is_string() && (s == "original" || s == "match_rms_adamw"), opt, ": invalid ", name, " ",
                        v.dump(), " (expected null, \"original\" or \"match_rms_adamw\")");
            o.adjust_lr_fn = s == "original" ? MuonLrAdjust::original : MuonLrAdjust::match_rms_adamw;
          },
          [](const MuonOptions& o) {
            switch (o.adjust_lr_fn) {
              case MuonLrAdjust::original: return nlohmann::json("original");
              case MuonLrAdjust::match_rms_adamw: return nlohmann::json("match_rms_adamw");
              case MuonLrAdjust::none: break;
            }
            return nlohmann::json(nullptr);
          },
          nullptr};
}

const OptionList<MuonOptions>& muon_options() {
  using O = MuonOptions;
  static const OptionList<O> list = {
      {number("lr", &O::lr, 1e-3, learning_rate()),
       number("weight_decay", &O::weight_decay, 0.1, finite_at_least_zero("weight_decay value")),
       number("momentum", &O::momentum, 0.95, finite_at_least_zero("momentum value")),
       flag("nesterov", &O::nesterov, true),
       number_triple("ns_coefficients", &O::ns_coefficients, {3.4445, -4.775, 2.0315},
                     finite("ns_coefficients value")),
       number("eps", &O::eps, 1e-7, finite_above_zero("epsilon value eps")),
       positive_integer("ns_steps", &O::ns_steps, 5), adjust_lr_option(), flag("use_addmm", &O::use_addmm, true)},
      [](const O& o, const char* opt) {
        LATHE_CHECK(o.ns_steps < 100, opt, ": invalid ns_steps = ", o.ns_steps,
                    " (must be below 100, as torch.optim.Muon requires)");
      }};
  return list;
}

// torch.lerp(start, end, weight) in the compute type of `start` (f32, or f64 for f64 tensors),
// with ATen's two forms (aten/src/ATen/native/Lerp.h): the one that keeps |w| small is exact at
// its end point.
Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  const bool wide = start.dtype() == DType::f64;
  const double w = wide ? weight : double(float(weight));
  const Tensor diff = sub(end, start);
  if (std::abs(w) < 0.5) return add(start, mul(diff, w));
  const double rest = wide ? 1.0 - w : double(1.0f - float(w));
  return sub(end, mul(diff, rest));
}

// s * x for a bf16 x as PyTorch computes it on a GPU: the scalar stays f32 (lathe's own
// tensor-scalar ops round it to the tensor's 16-bit type first, torch 1.13's CPU rule, which would
// turn b = -4.775 into -4.78125), the product is rounded to bf16 once.
Tensor scaled(const Tensor& x, double s) { return mul(x.to(DType::f32), s).to(DType::bf16); }

}  // namespace

Muon::Muon(const nlohmann::json& defaults) : TypedOptimizer("muon", muon_options(), defaults, /*fused=*/false) {}

Muon::Muon(const std::vector<Tensor>& params, const nlohmann::json& options) : Muon(options) {
  add_param_group(params);
}

void Muon::check_param(const Tensor& p, const std::string& what) const {
  LATHE_CHECK(p.dim() == 2, "muon: ", what, " is not a matrix; Muon updates 2-D parameters only (give embeddings, "
              "heads, gains and biases to AdamW beside it)");
}

Tensor muon_orthogonalize(const Tensor& update, const MuonOptions& o) {
  LATHE_CHECK(update.dim() == 2, "muon: the Newton-Schulz iteration takes a matrix, got ", update.desc());
  const auto [a, b, c] = o.ns_coefficients;
  const bool tall = update.shape()[0] > update.shape()[1];
  Tensor x = update.to(DType::bf16);
  if (tall) x = x.transpose(0, 1);
  // PyTorch's norm of a bf16 tensor accumulates in f32 and returns bf16; so does its clamp.
  const Tensor norm = sqrt(sum(square(x.to(DType::f32)))).to(DType::bf16);
  x = div(x, clamp(norm, o.eps, std::nullopt));
  for (int64_t s = 0; s < o.ns_steps; ++s) {
    const Tensor gram = matmul(x, x.transpose(0, 1));
    if (o.use_addmm) {
      // addmm(gram, gram, gram, beta=b, alpha=c) and addmm(x, B, x, beta=a): bf16 values multiply
      // exactly in f32, and the scaled sum is rounded to bf16 once.
      const Tensor gram32 = gram.to(DType::f32), x32 = x.to(DType::f32);
      const Tensor poly = add(mul(matmul(gram32, gram32), c), mul(gram32, b)).to(DType::bf16);
      x = add(matmul(poly.to(DType::f32), x32), mul(x32, a)).to(DType::bf16);
    } else {
      // b * gram + c * gram @ gram (Python reads it as (c * gram) @ gram), then a * x + B @ x,
      // every term rounded to bf16.
      const Tensor poly = add(scaled(gram, b), matmul(scaled(gram, c), gram));
      x = add(scaled(x, a), matmul(poly, x));
    }
  }
  return tall ? x.transpose(0, 1) : x;
}

double muon_adjusted_lr(double lr, MuonLrAdjust adjust, int64_t rows, int64_t cols) {
  const double r = double(rows), c = double(cols);
  if (adjust == MuonLrAdjust::match_rms_adamw) return lr * (0.2 * std::sqrt(std::max(r, c)));
  return lr * std::sqrt(std::max(1.0, r / c));  // null or "original"
}

void Muon::update() {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    const MuonOptions& o = options(gi);
    for (size_t j = 0; j < g.params.size(); ++j) {
      Tensor p = g.params[j];
      const int64_t i = g.indices[j];
      if (!participates(p)) continue;  // before of(i), which creates the buffer
      Tensor& buf = momentum_buffer_.of(i);
      const Tensor grad = p.grad().to(buf.dtype());
      buf.copy_(lerp(buf, grad, 1 - o.momentum));
      const Tensor ortho = muon_orthogonalize(o.nesterov ? lerp(grad, buf, o.momentum) : buf, o);
      const double adjusted_lr = muon_adjusted_lr(o.lr, o.adjust_lr_fn, p.shape()[0], p.shape()[1]);
      // p *= 1 (no decay) changes no bit, so it is skipped.
      if (o.weight_decay != 0) p.copy_(mul(p, 1 - o.lr * o.weight_decay));
      p.copy_(add(p, mul(ortho.to(p.dtype()), -adjusted_lr)));
    }
  }
}

}  // namespace lathe::optim
