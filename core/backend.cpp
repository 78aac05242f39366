#include "core/backend.h"

#include <array>
#include <cstring>

#include "core/cpu/cpu_backend.h"

namespace lathe {

namespace {
std::array<Backend*, 3>& registry() {
  static CpuBackend cpu(DeviceType::cpu);
  static CpuBackend sim(DeviceType::sim);
  static std::array<Backend*, 3> r{&cpu, &sim, nullptr};
  return r;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) { registry()[size_t(type)] = backend; }

bool backend_available(DeviceType type) { return registry()[size_t(type)] != nullptr; }

Backend& backend_for(Device d) {
  Backend* b = registry()[size_t(d.type)];
  if (b == nullptr) {
    LATHE_FAIL("device ", d, " is not available: this build of lathe has no CUDA backend ",
               "(configure with -DLATHE_CUDA=ON on a machine with the CUDA toolkit)");
  }
  int n = b->device_count();
  LATHE_CHECK(d.index >= 0 && d.index < n, "device ", d, " does not exist: ", n, " ",
              b->name(), " device(s) present", n == 0 ? " (no GPU was found)" : "");
  return *b;
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::gelu: return "gelu";
    case UnaryOp::relu: return "relu";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::abs: return "abs";
    case UnaryOp::square: return "square";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::sign: return "sign";
    case UnaryOp::pow_scalar: return "pow";
    case UnaryOp::clamp: return "clamp";
    case UnaryOp::affine: return "affine";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::eq: return "eq";
    case BinaryOp::ne: return "ne";
    case BinaryOp::lt: return "lt";
    case BinaryOp::le: return "le";
    case BinaryOp::gt: return "gt";
    case BinaryOp::ge: return "ge";
    case BinaryOp::gelu_backward: return "gelu_backward";
    case BinaryOp::tanh_backward: return "tanh_backward";
    case BinaryOp::sigmoid_backward: return "sigmoid_backward";
    case BinaryOp::relu_backward: return "relu_backward";
  }
  return "?";
}

// ---- CpuBackend: memory ----
CpuBackend::CpuBackend(DeviceType type) : type_(type) {
  int n = type == DeviceType::cpu ? 1 : kSimDeviceCount;
  for (int i = 0; i < n; ++i)
    allocators_.push_back(std::make_unique<HostAllocator>(Device{type, i}.str()));
}

std::string CpuBackend::name() const { return type_ == DeviceType::cpu ? "cpu" : "sim"; }
Allocator& CpuBackend::allocator(int index) { return *allocators_.at(size_t(index)); }
int CpuBackend::device_count() const { return int(allocators_.size()); }

void CpuBackend::copy_to_host(void* dst, const void* src, size_t nbytes, int) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}
void CpuBackend::copy_from_host(void* dst, const void* src, size_t nbytes, int) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

size_t check_adam_update_multi_lists(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                                     const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                                     bool amsgrad) {
  const size_t n = params.size();
  LATHE_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
                  (amsgrad ? max_exp_avg_sqs.size() == n : max_exp_avg_sqs.empty()),
              "adam_update_multi: ", n, " params but ", grads.size(), " grads, ", exp_avgs.size(), " exp_avgs, ",
              exp_avg_sqs.size(), " exp_avg_sqs, ", max_exp_avg_sqs.size(), " max_exp_avg_sqs, ", steps.size(),
              " steps");
  return n;
}

}  // namespace lathe
