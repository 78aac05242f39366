// The fused Adam/AdamW updates: the one place that checks their operands, so that every backend's
// kernel (core/cpu/optim.cpp, cuda/optim.cu) can assume them.
//
// Why an optimizer's arithmetic has an entry in core at all: device code reaches lathe only
// through a backend (core/backend.h), and cuda/ may depend on core alone. A fused multi-tensor
// update has to be a backend kernel to run on the GPU in one pass, so core declares it, as a
// kernel over plain tensors and scalars; the optimizer itself (its groups, options and state
// placement) stays in optim/.
#include <set>

#include "core/ops.h"

namespace lathe {

namespace {

// The moments and the gradient have the parameter's shape and device and are contiguous; the
// gradient has the parameter's dtype, the moments one dtype of their own (f32 for 16-bit params).
void check_adam_operands(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, bool amsgrad) {
  LATHE_CHECK(param.defined() && is_floating(param.dtype()) && param.is_contiguous(), op,
              ": the parameter must be a contiguous floating tensor, got ",
              param.defined() ? param.desc() : std::string("an undefined tensor"));
  auto like_param = [&](const Tensor& t, const char* what, DType dt) {
    LATHE_CHECK(t.defined() && t.is_contiguous() && t.shape() == param.shape() && t.dtype() == dt &&
                    t.device() == param.device(),
                op, ": ", what, " must be a contiguous ", dtype_name(dt),
                " tensor of the parameter's shape and device; param ", param.desc(), ", ", what, " ",
                t.defined() ? t.desc() : std::string("undefined"));
  };
  like_param(grad, "grad", param.dtype());
  LATHE_CHECK(exp_avg.defined() && is_floating(exp_avg.dtype()), op, ": exp_avg must be a floating tensor, got ",
              exp_avg.defined() ? exp_avg.desc() : std::string("undefined"));
  like_param(exp_avg, "exp_avg", exp_avg.dtype());
  like_param(exp_avg_sq, "exp_avg_sq", exp_avg.dtype());
  if (amsgrad) like_param(max_exp_avg_sq, "max_exp_avg_sq", exp_avg.dtype());
}

}  // namespace

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, double step, const AdamParams& p) {
  check_adam_operands("adam_update", param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, p.amsgrad);
  if (param.numel() == 0) return;
  backend_for(param.device()).adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, p);
  param.bump_version();  // a 16-bit copy of the old weights (nn/precision.h) is stale now
}

void adam_update_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                       const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                       const AdamParams& p, const std::vector<Tensor>& copies) {
  const size_t n = params.size();
  LATHE_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
                  (p.amsgrad ? max_exp_avg_sqs.size() == n : max_exp_avg_sqs.empty()),
              "adam_update_multi: ", n, " params but ", grads.size(), " grads, ", exp_avgs.size(), " exp_avgs, ",
              exp_avg_sqs.size(), " exp_avg_sqs, ", max_exp_avg_sqs.size(), " max_exp_avg_sqs, ", steps.size(),
              " steps");
  LATHE_CHECK(copies.empty() || copies.size() == n, "adam_update_multi: ", n, " params but ", copies.size(),
              " copies (none, or one per parameter)");
  if (n == 0) return;
  // One tensor updated twice in one pass would race on a GPU (and be updated twice on the CPU).
  std::set<const void*> seen;
  for (size_t i = 0; i < n; ++i) {
    check_adam_operands("adam_update_multi", params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                        p.amsgrad ? max_exp_avg_sqs[i] : Tensor(), p.amsgrad);
    LATHE_CHECK(params[i].device() == params[0].device(), "adam_update_multi: parameters on ", params[0].device(),
                " and ", params[i].device(), " in one call");
    const Tensor& st = steps[i];
    LATHE_CHECK(st.defined() && st.numel() == 1 && st.dtype() == DType::f32 && st.device() == params[i].device(),
                "adam_update_multi: step ", i, " must be a one-element f32 tensor on ", params[i].device(),
                ", got ", st.defined() ? st.desc() : std::string("an undefined tensor"));
    const Tensor copy = copies.empty() ? Tensor() : copies[i];
    if (copy.defined())
      LATHE_CHECK(params[i].dtype() == DType::f32 && (copy.dtype() == DType::bf16 || copy.dtype() == DType::f16) &&
                      copy.is_contiguous() && copy.shape() == params[i].shape() && copy.device() == params[i].device(),
                  "adam_update_multi: the copy of parameter ", i, " must be a contiguous bf16 or f16 tensor of an f32 "
                  "parameter's shape and device; param ", params[i].desc(), ", copy ", copy.desc());
    for (const Tensor* t : {&params[i], &exp_avgs[i], &exp_avg_sqs[i], &st, &copy}) {
      if (!t->defined() || t->numel() == 0) continue;
      LATHE_CHECK(seen.insert(t->data_ptr()).second, "adam_update_multi: tensor ", t->desc(), " of parameter ", i,
                  " is also updated by another entry of the same call");
    }
  }
  const std::vector<Tensor> no_copies(copies.empty() ? n : 0);
  backend_for(params[0].device())
      .adam_update_multi(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, p, copies.empty() ? no_copies : copies);
  for (const Tensor& param : params) param.bump_version();
  for (const Tensor& copy : copies)
    if (copy.defined()) copy.bump_version();
}

}  // namespace lathe
