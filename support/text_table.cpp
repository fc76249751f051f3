// Aligned text tables.
#include "support/text_table.h"

#include <algorithm>

namespace kiln {

size_t displayWidth(const std::string &text) {
  size_t width = 0;
  for (unsigned char c : text)
    width += (c & 0xC0) != 0x80; // continuation bytes take no column
  return width;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align)
    : align_(std::move(align)) {
  rows_.push_back(std::move(header));
}

void TextTable::addRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

std::string TextTable::toString() const {
  std::vector<size_t> widths;
  for (const auto &row : rows_) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], displayWidth(row[i]));
  }
  std::string out;
  for (const auto &row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const size_t pad = widths[i] - displayWidth(row[i]);
      const bool right = i < align_.size() && align_[i] == Align::Right;
      if (i > 0)
        line += "  ";
      if (right)
        line += std::string(pad, ' ');
      line += row[i];
      if (!right)
        line += std::string(pad, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

} // namespace kiln
