// CudaBackend: the optimizer kernels, Adam and AdamW one tensor at a time or many per launch
// (cuda/optim.cu).
#include <algorithm>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

namespace {
AdamArgs adam_args(const AdamParams& p, double step) {
  return AdamArgs{p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled_weight_decay, p.amsgrad, p.maximize,
                  step};
}
}  // namespace

void CudaBackend::adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                              const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, double step,
                              const AdamParams& p) {
  DeviceContext& ctx = context_of(param);
  launch_adam(dt_of(param.dtype()), dt_of(exp_avg.dtype()), param.data_ptr(), grad.data_ptr(), exp_avg.data_ptr(),
              exp_avg_sq.data_ptr(), p.amsgrad ? max_exp_avg_sq.data_ptr() : nullptr, param.numel(),
              adam_args(p, step), ctx.stream);
}

// Operands are checked by core/ops/adam_update.cpp. Parameters are grouped by (parameter dtype,
// moment dtype); each group is one fused launch per up to 40 tensors. Step counters stay on the
// GPU: nothing here reads device memory.
void CudaBackend::adam_update_multi(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                    const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                                    const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                                    const AdamParams& p, const std::vector<Tensor>& copies) {
  const size_t n = params.size();
  DeviceContext& ctx = context_of(params[0]);
  std::vector<std::pair<std::pair<DType, DType>, std::vector<AdamTensorPtrs>>> groups;
  for (size_t i = 0; i < n; ++i) {
    const Tensor vmax = p.amsgrad ? max_exp_avg_sqs[i] : Tensor();
    const Tensor& st = steps[i];
    const auto key = std::pair{params[i].dtype(), exp_avgs[i].dtype()};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(AdamTensorPtrs{params[i].data_ptr(), grads[i].data_ptr(), exp_avgs[i].data_ptr(),
                                        exp_avg_sqs[i].data_ptr(), p.amsgrad ? vmax.data_ptr() : nullptr,
                                        static_cast<float*>(st.data_ptr()), params[i].numel(),
                                        copies[i].defined() ? copies[i].data_ptr() : nullptr,
                                        copies[i].defined() ? dt_of(copies[i].dtype()) : DT::bf16});
  }
  for (const auto& [key, tensors] : groups)
    launch_adam_multi(dt_of(key.first), dt_of(key.second), tensors.data(), int(tensors.size()), adam_args(p, 0),
                      ctx.stream);
}

}  // namespace lathe::cuda
