// The text of a custom op's <compute> or <gradient> element with the file
// position of every character, so that errors in the expression point at
// file:line:column of the XML file (docs/custom-ops.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"

namespace kiln::ops::custom {

// 1-based line and column in the XML file; line 0 means unknown.
struct SourceLoc {
  int line = 0;
  int column = 0;
};

// "12:7".
std::string locString(const SourceLoc &loc);

struct SourceText {
  std::string text;
  std::vector<SourceLoc> locs; // one per byte of text, then one for the end

  SourceLoc at(size_t offset) const;
};

// Names the file and the op in errors: "ops.xml:12:7: op SwishX: <message>".
struct Where {
  std::string file;
  std::string op;

  Error error(const SourceLoc &loc, const std::string &message) const;
  Error error(const std::string &message) const; // no position
};

// The content of the first element `<tag ...>` that starts at or after byte
// `from` of `xml`, with character references and the predefined entities
// decoded, CDATA sections taken verbatim and comments dropped; `from` moves
// past the element. None when no such element is found.
std::optional<SourceText> elementText(std::string_view xml, std::string_view tag, size_t &from);

// Byte offset of the start of 1-based line `line` (the end of `xml` if past it).
size_t lineOffset(std::string_view xml, int line);

// `text` positioned from `first` on, each new line starting at column 1: the
// fallback when the element cannot be found in the raw file.
SourceText positionedText(std::string_view text, SourceLoc first);

} // namespace kiln::ops::custom
