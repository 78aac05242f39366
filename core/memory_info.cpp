#include "core/memory_info.h"

#include <unistd.h>

#include <limits>

namespace lathe {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  int64_t bytes = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(int64_t(pages), int64_t(page), &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

}  // namespace lathe
