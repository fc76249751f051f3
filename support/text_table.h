// Columns aligned to their widest cell, for the tables kiln prints (kiln
// cache list): a name of any length widens its column instead of pushing
// the rest of its row out of line.
#pragma once

#include <string>
#include <vector>

namespace kiln {

class TextTable {
public:
  enum class Align { Left, Right };

  // The header row; one alignment per column (missing ones: left).
  explicit TextTable(std::vector<std::string> header, std::vector<Align> align = {});
  void addRow(std::vector<std::string> cells);
  // Every row on its own line, columns two spaces apart, no trailing blanks.
  std::string toString() const;

private:
  std::vector<std::vector<std::string>> rows_; // the header first
  std::vector<Align> align_;
};

// The columns `text` takes on a terminal: UTF-8 code points, not bytes.
size_t displayWidth(const std::string &text);

} // namespace kiln
