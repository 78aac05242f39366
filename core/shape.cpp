#include "core/shape.h"

#include <sstream>

#include "core/error.h"

namespace lathe {

int64_t numel_of(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;  // before multiplying: [2^40, 2^40, 0] is empty, not an overflow
  int64_t n = 1;
  for (int64_t d : s)
    LATHE_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", shape_str(s),
                " has more elements than a 64-bit count can hold");
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // a scalar accepts dim 0 and -1, as in PyTorch
  LATHE_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " is out of range for a tensor with ", ndim,
              " dims");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LATHE_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace lathe
