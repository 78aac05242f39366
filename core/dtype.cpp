#include "core/dtype.h"

#include <ostream>

#include "core/error.h"

namespace lathe {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  LATHE_FAIL("dtype_size: unknown dtype ", int(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8})
    if (name == dtype_name(t)) return t;
  LATHE_FAIL("unknown dtype '", name, "' (expected f32, f64, bf16, f16, i32, i64 or bool)");
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

DType promote(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
      case DType::b8: return 0;
      case DType::i32: return 1;
      case DType::i64: return 2;
      case DType::f16: return 3;
      case DType::bf16: return 3;
      case DType::f32: return 4;
      case DType::f64: return 5;
    }
    return 0;
  };
  // bf16 with f16 has no exact common 16-bit type; PyTorch promotes to f32 and so do we.
  if ((a == DType::bf16 && b == DType::f16) || (a == DType::f16 && b == DType::bf16)) return DType::f32;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace lathe
