// Shared by the tutorial's programs (docs/tutorial/): the line that starts a named part of a
// program's output, which a chapter's output block can show on its own (tools/check_tutorial.py).
#pragma once

#include <iostream>
#include <string>

namespace tutorial {

inline void part(const std::string& name) { std::cout << "=== " << name << " ===\n"; }

}  // namespace tutorial
