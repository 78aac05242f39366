// Sizes and durations as people read them, for messages and logs.
#pragma once

#include <cstddef>
#include <string>

namespace lathe {

// "12.3 MiB": binary units, three significant digits.
std::string format_bytes(size_t bytes);
// "1h02m", "3m05s", "42s": for ETAs.
std::string format_duration(double seconds);

}  // namespace lathe
