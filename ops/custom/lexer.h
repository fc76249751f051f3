// Tokens of the custom-op compute language: names, numbers and punctuation,
// each with its position in the XML file.
#pragma once

#include <string>
#include <vector>

#include "ops/custom/source_text.h"
#include "support/error.h"

namespace kiln::ops::custom {

enum class TokenKind { Name, Number, Punct, End };

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text; // the name, the number as written, or the punctuation ("<=")
  double number = 0;
  SourceLoc loc;
  bool line_start = false; // the first token on its line

  bool is(std::string_view punct) const { return kind == TokenKind::Punct && text == punct; }
  // "'x'", "the number 2.5", "the end of the compute": for "expected ..., got ...".
  std::string describe() const;
};

// Splits `source` into tokens ending with one End token. Punctuation:
// [ ] ( ) , ; = + - * / < <= > >= == !=. Errors name the unexpected character.
Expected<std::vector<Token>> lex(const SourceText &source, const Where &where);

} // namespace kiln::ops::custom
