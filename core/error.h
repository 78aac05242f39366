// lathe's one exception type, and the check macro every op uses to report bad input.
//
// Errors are values a user can act on: the message names the op, and the shapes, dtypes or
// devices involved. LATHE_CHECK builds the message only when the check fails.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lathe {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace lathe

// LATHE_CHECK(cond, "op: ", what, ...) throws lathe::Error with the concatenated message.
#define LATHE_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) throw ::lathe::Error(::lathe::detail::cat(__VA_ARGS__)); \
  } while (0)

#define LATHE_FAIL(...) throw ::lathe::Error(::lathe::detail::cat(__VA_ARGS__))
