#include "support/text_lines.h"

#include <sstream>

namespace kiln {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<ContentLine> contentLines(std::string_view text) {
  std::vector<ContentLine> lines;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number)
    if (std::string content = trim(line.substr(0, line.find('#'))); !content.empty())
      lines.push_back({number, std::move(content)});
  return lines;
}

} // namespace kiln
