// Gives a parsed compute its meaning: resolves names to the op's inputs,
// attributes and index variables, tells reductions from functions, records
// which input axes each index variable indexes (its extent) and checks
// types (values against conditions), the ranks of inputs and that every
// output index is bound by an input. Errors point at file:line:column.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ops/custom/ast.h"
#include "ops/custom/parser.h"
#include "support/error.h"

namespace kiln::ops::custom {

// What the compute of one op may name.
struct Signature {
  std::string op;
  std::string file;
  std::vector<std::string> inputs;
  std::vector<std::optional<int>> ranks; // known ranks (gradients); empty: all from uses
  std::vector<std::string> outputs;
  std::vector<std::pair<std::string, AttrKind>> attrs; // every attribute of the op
  std::map<std::string, int> input_aliases;            // other names of inputs ("dy")
  std::vector<int> like_input; // per output: the input whose shape it has, or -1; empty: none
  SourceLoc loc;               // where the compute starts, for errors about the whole op
};

Expected<Program> checkProgram(const std::vector<SyntaxStatement> &statements,
                               const Signature &signature);

// Parses and checks `source`.
Expected<Program> compileCompute(const SourceText &source, const Signature &signature);

} // namespace kiln::ops::custom
