// Line-oriented text files (CANN's old switch format, keep_dtype lists):
// one entry a line, '#' starts a comment, blank lines are skipped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// `s` without leading and trailing spaces, tabs and carriage returns.
std::string trim(std::string_view s);

struct ContentLine {
  int number = 0;   // 1-based, for "file: line N" messages
  std::string text; // trimmed, comment removed, never empty
};

std::vector<ContentLine> contentLines(std::string_view text);

} // namespace kiln
