#include "core/reduce_plan.h"

#include <algorithm>

namespace lathe {

ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims) {
  ReducePlan plan;
  const int64_t nd = x.dim();
  bool trailing = true, leading = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != nd - int64_t(dims.size()) + int64_t(i)) trailing = false;
    if (dims[i] != int64_t(i)) leading = false;
  }
  plan.outputs = 1;
  for (int64_t i = 0; i < nd; ++i) {
    if (std::binary_search(dims.begin(), dims.end(), i)) plan.reduced *= x.shape()[size_t(i)];
    else plan.outputs *= x.shape()[size_t(i)];
  }
  plan.x = x;
  plan.trailing = trailing;
  if (!(x.is_contiguous() && (trailing || leading))) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < nd; ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
    for (int64_t d : dims) perm.push_back(d);
    plan.x = x.permute(perm).contiguous();
    plan.trailing = true;
  }
  return plan;
}

}  // namespace lathe
