// The parser of the custom-op compute language (docs/custom-ops.md):
//
//   compute    := statement { (';' | newline) statement }
//   statement  := NAME [ '[' [ NAME { ',' NAME } ] ']' ] '=' expr
//   expr       := additive [ ('<' | '<=' | '>' | '>=' | '==' | '!=') additive ]
//   additive   := term { ('+' | '-') term }
//   term       := unary { ('*' | '/') unary }
//   unary      := '-' unary | primary
//   primary    := NUMBER | NAME | NAME '[' NAME { ',' NAME } ']'
//               | NAME '(' expr { ',' expr } ')' | '(' expr ')'
//
// The result is a syntax tree with names unresolved; checker.h gives them
// meaning (inputs, attributes, index variables, functions, reductions).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/custom/ast.h"
#include "ops/custom/source_text.h"
#include "support/error.h"

namespace kiln::ops::custom {

struct Syntax;
using SyntaxPtr = std::shared_ptr<const Syntax>;

struct NameAt {
  std::string name;
  SourceLoc loc;
};

struct Syntax {
  enum class Kind { Number, Name, Subscript, Call, Neg, Binary };
  Kind kind = Kind::Number;
  SourceLoc loc;
  std::string name; // Name, Subscript, Call
  double number = 0;
  BinOp op = BinOp::Add;
  std::vector<NameAt> indices; // Subscript
  std::vector<SyntaxPtr> args; // Call arguments, Neg and Binary operands
};

struct SyntaxStatement {
  NameAt output;
  std::vector<NameAt> indices;
  SyntaxPtr rhs;
};

Expected<std::vector<SyntaxStatement>> parseCompute(const SourceText &source, const Where &where);

} // namespace kiln::ops::custom
