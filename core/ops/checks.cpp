// Operand checks shared by every op: errors name the op and what was found.
#include <sstream>

#include "core/ops.h"

namespace lathe {

void check_same_device(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    if (t.device() != first->device()) {
      std::ostringstream os;
      os << op << ": expected all tensors on one device, but found";
      const char* sep = " ";
      for (const Tensor& u : ts) {
        if (!u.defined()) continue;
        os << sep << u.desc();
        sep = " and ";
      }
      throw Error(os.str());
    }
  }
}

void check_floating(const char* op, const Tensor& t, const char* what) {
  LATHE_CHECK(is_floating(t.dtype()), op, ": ", what, " must be a floating tensor, got ", t.desc());
}

void check_op_dtype(const char* op, OpDTypes dtypes, const Tensor& t) {
  switch (dtypes) {
    case OpDTypes::floating: return check_floating(op, t);
    case OpDTypes::numeric:
      LATHE_CHECK(t.dtype() != DType::b8, op, ": not defined for dtype ", dtype_name(t.dtype()));
      return;
    case OpDTypes::all: return;
  }
}

}  // namespace lathe
