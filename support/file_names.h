// Names read from files that become file names: a name that must already be
// a plain file name is checked, any other name is made into a safe one.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Why `name` is not a plain file name that stays in its folder (empty, ".",
// "..", a '/' anywhere, hence also an absolute path, or a NUL byte); empty
// when it is one.
std::string plainFileNameProblem(std::string_view name);

// Any name (a node's, a kernel's) as a file name that stays in its folder:
// letters, digits, '.', '_' and '-' kept, every other byte '_', at most 80
// bytes, never starting with '.'.
std::string fileStem(std::string_view name);

} // namespace kiln
