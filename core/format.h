// Sizes and durations as people read them, for messages and logs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lathe {

// "12.3 MiB": binary units, three significant digits.
std::string format_bytes(size_t bytes);
// "1h02m", "3m05s", "42s": for ETAs.
std::string format_duration(double seconds);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// `s` as a terminal shows it safely: valid UTF-8 stays as it is; every byte of an invalid sequence,
// and every control character but tab (a newline too: a message stays one line), is written \xHH (a backslash is itself
// written \\ only where an escape could be misread: before "x"). Paths, which are bytes on
// Linux, and text quoted from a damaged file go through this before they are printed.
std::string printable(std::string_view s);

}  // namespace lathe
