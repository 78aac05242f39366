// CudaBackend: softmax, layer norm, embedding, cross-entropy, indexing, Adam.
//
// The op layer (core/ops/) has checked every operand: devices, dtypes, shapes, index dtypes.
// Row kernels take contiguous rows, so strided inputs are made contiguous first (as on the CPU).
// Ids and indices are checked by the kernels themselves; a bad one surfaces as a lathe::Error at
// the host's next synchronisation with the GPU (see runtime.h), so no kernel ever reads out of
// bounds and the host never waits just to validate.
#include <algorithm>
#include <climits>

#include "cuda/cuda_backend.h"

namespace lathe::cuda {

namespace {

struct Rows {
  int64_t rows, len;
};
Rows rows_of(const Tensor& x) {
  const int64_t len = x.dim() ? x.shape().back() : 1;
  return {len ? x.numel() / len : 0, len};
}

void check_grid(int64_t blocks, const char* op, const Tensor& t) {
  LATHE_CHECK(blocks <= INT_MAX, op, ": ", t.desc(), " has more rows than one CUDA launch takes (2^31 - 1)");
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }
const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// A tensor seen as [outer, size, inner] around `dim`.
void split_around(const Tensor& t, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.shape()[size_t(d)];
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.shape()[size_t(d)];
}

}  // namespace

// ---------------------------------------------------------------- softmax

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.contiguous();
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, log ? "log_softmax" : "softmax", x);
  launch_softmax(dt_of(x.dtype()), xc.data_ptr(), out.data_ptr(), rows, len, log, ctx.stream);
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  DeviceContext& ctx = context_of(gx);
  const Tensor yc = y.contiguous(), gc = gy.contiguous();
  const auto [rows, len] = rows_of(yc);
  check_grid(rows, "softmax_backward", y);
  launch_softmax_backward(dt_of(y.dtype()), yc.data_ptr(), gc.data_ptr(), gx.data_ptr(), rows, len, log, ctx.stream);
}

// ---------------------------------------------------------------- layer norm

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                             const Tensor& mean, const Tensor& rstd) {
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.contiguous(), wc = contiguous_or_undefined(weight), bc = contiguous_or_undefined(bias);
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "layer_norm", x);
  launch_layer_norm(dt_of(x.dtype()), xc.data_ptr(), ptr_or_null(wc), ptr_or_null(bc), eps, out.data_ptr(),
                    mean.data_ptr(), rstd.data_ptr(), stat == DType::f64, rows, len, ctx.stream);
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& gy, const Tensor& gx, const Tensor& gweight,
                                      const Tensor& gbias) {
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  DeviceContext& ctx = context_of(gx);
  const Tensor xc = x.contiguous(), gc = gy.contiguous(), wc = contiguous_or_undefined(weight);
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  const auto [rows, len] = rows_of(xc);
  check_grid(rows, "layer_norm_backward", x);
  const DT dt = dt_of(x.dtype());
  Tensor scratch;
  if (gweight.defined() || gbias.defined()) {
    if (rows == 0) {  // no rows: the parameter gradients are empty sums
      if (gweight.defined()) fill(gweight, 0.0);
      if (gbias.defined()) fill(gbias, 0.0);
      return;
    }
    scratch = scratch_like(x, layer_norm_backward_scratch_bytes(dt, rows, len));
  }
  launch_layer_norm_backward(dt, xc.data_ptr(), ptr_or_null(wc), mc.data_ptr(), rc.data_ptr(), stat == DType::f64,
                             gc.data_ptr(), gx.data_ptr(), mut_ptr_or_null(gweight), mut_ptr_or_null(gbias), rows,
                             len, scratch.defined() ? scratch.data_ptr() : nullptr, ctx.stream);
}

// ---------------------------------------------------------------- embedding

void CudaBackend::embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  const Tensor w = weight.contiguous(), ic = idx.contiguous();
  const int64_t V = w.shape()[0], C = w.shape()[1], n = ic.numel();
  check_grid(n, "embedding", idx);
  launch_embedding(dt_of(w.dtype()), w.data_ptr(), V, C, dt_of(ic.dtype()), ic.data_ptr(), n, out.data_ptr(),
                   ctx.error_device, ctx.stream);
}

void CudaBackend::embedding_backward(const Tensor& idx, const Tensor& gout, const Tensor& gweight) {
  DeviceContext& ctx = context_of(gweight);
  const int64_t V = gweight.shape()[0], C = gweight.shape()[1], n = idx.numel();
  LATHE_CHECK(n < INT_MAX && V < INT_MAX, "embedding_backward: ", n, " ids over ", V,
              " rows exceed the CUDA kernel's 32-bit bucket positions");
  if (n == 0) return;
  const Tensor ic = idx.contiguous(), g = gout.contiguous();
  Tensor scratch = scratch_like(gweight, embedding_backward_scratch_bytes(V, n));
  launch_embedding_backward(dt_of(gweight.dtype()), dt_of(ic.dtype()), ic.data_ptr(), n, g.data_ptr(),
                            gweight.data_ptr(), V, C, scratch.data_ptr(), ctx.error_device, ctx.stream);
}

// ---------------------------------------------------------------- cross-entropy

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                const Tensor& losses) {
  DeviceContext& ctx = context_of(losses);
  const Tensor x = logits.contiguous(), t = targets.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  check_grid(N, "cross_entropy", logits);
  launch_cross_entropy(dt_of(x.dtype()), x.data_ptr(), N, V, dt_of(t.dtype()), t.data_ptr(), ignore_index,
                       losses.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                         const Tensor& gloss, const Tensor& glogits) {
  DeviceContext& ctx = context_of(glogits);
  const Tensor x = logits.contiguous(), t = targets.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  check_grid(N, "cross_entropy_backward", logits);
  // gloss is often one scalar broadcast over the rows (stride 0).
  const int64_t gstride = gloss.dim() ? gloss.strides()[0] : 0;
  launch_cross_entropy_backward(dt_of(x.dtype()), x.data_ptr(), N, V, dt_of(t.dtype()), t.data_ptr(), ignore_index,
                                gloss.data_ptr(), gstride, glogits.data_ptr(), ctx.error_device, ctx.stream);
}

// ---------------------------------------------------------------- indexing

void CudaBackend::index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  const Tensor xc = x.dim() ? x.contiguous() : x.reshape({1}), ic = idx.contiguous();
  IndexShape sh;
  split_around(xc, dim, sh.outer, sh.inner);
  sh.src_size = xc.shape()[size_t(dim)];
  sh.idx_size = ic.numel();
  launch_index_select(dt_of(x.dtype()), xc.data_ptr(), sh, dt_of(ic.dtype()), ic.data_ptr(), out.data_ptr(),
                      ctx.error_device, ctx.stream);
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  DeviceContext& ctx = context_of(out);
  // Accumulate into a contiguous buffer (out itself when it already is one).
  const Tensor acc = out.is_contiguous() ? out : out.contiguous();
  const Tensor ac = acc.dim() ? acc : acc.reshape({1});
  const Tensor sc = src.contiguous(), ic = idx.contiguous();
  IndexShape sh;
  split_around(ac, dim, sh.outer, sh.inner);
  sh.src_size = ac.shape()[size_t(dim)];
  sh.idx_size = ic.numel();
  launch_index_add(dt_of(out.dtype()), ac.data_ptr(), sh, dt_of(ic.dtype()), ic.data_ptr(), sc.data_ptr(),
                   ctx.error_device, ctx.stream);
  if (!out.is_contiguous()) copy(acc, out);
}

void CudaBackend::gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  DeviceContext& ctx = context_of(out);
  if (out.numel() == 0) return;
  const Tensor xv = x.dim() ? x : x.reshape({1}), iv = idx.dim() ? idx : idx.reshape({1});
  const Tensor ov = out.dim() ? out : out.reshape({1});
  Strides xs = xv.strides();
  const int64_t x_dim_stride = xs[size_t(dim)], x_dim_size = xv.shape()[size_t(dim)];
  xs[size_t(dim)] = 0;  // that coordinate comes from idx
  const Geometry<3> g = make_geometry<3>(iv.shape(), {&ov.strides(), &iv.strides(), &xs}, "gather");
  launch_gather(dt_of(x.dtype()), g, x_dim_stride, x_dim_size, dt_of(idx.dtype()), ov.data_ptr(), iv.data_ptr(),
                xv.data_ptr(), ctx.error_device, ctx.stream);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  DeviceContext& ctx = context_of(out);
  if (idx.numel() == 0) return;
  const Tensor ov = out.dim() ? out : out.reshape({1}), iv = idx.dim() ? idx : idx.reshape({1});
  const Tensor sv = src.dim() ? src : src.reshape({1});
  ScatterLine line;
  line.len = iv.shape()[size_t(dim)];
  line.idx_stride = iv.strides()[size_t(dim)];
  line.src_stride = sv.strides()[size_t(dim)];
  line.out_stride = ov.strides()[size_t(dim)];
  line.out_size = ov.shape()[size_t(dim)];
  Shape lines_shape = iv.shape();
  lines_shape[size_t(dim)] = 1;
  const Geometry<3> g =
      make_geometry<3>(lines_shape, {&iv.strides(), &sv.strides(), &ov.strides()}, "scatter_add");
  launch_scatter_add(dt_of(out.dtype()), g, line, dt_of(idx.dtype()), iv.data_ptr(), sv.data_ptr(), ov.data_ptr(),
                     ctx.error_device, ctx.stream);
}

// ---------------------------------------------------------------- optimizer

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
                                    const AdamParams& p) {
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
                                        static_cast<float*>(st.data_ptr()), params[i].numel()});
  }
  for (const auto& [key, tensors] : groups)
    launch_adam_multi(dt_of(key.first), dt_of(key.second), tensors.data(), int(tensors.size()), adam_args(p, 0),
                      ctx.stream);
}

}  // namespace lathe::cuda
