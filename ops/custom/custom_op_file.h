// Reading a custom-op file: the XML of the built-in ops (ops/defs/*.xml,
// op_def.h) plus, per op, one <compute> with one statement per output and
// optional <gradient input="x"> elements (docs/custom-ops.md):
//
//   <ops>
//     <op name="SwishX" kind="elementwise">
//       <input name="x" dtypes="f32,f16,bf16"/>
//       <output name="y"/>
//       <compute>y[i, j] = x[i, j] * sigmoid(x[i, j])</compute>
//     </op>
//   </ops>
//
// Every error names the file, and for the compute the line and column.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/custom/ast.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::ops::custom {

struct DeclaredGradient {
  Statement statement; // of gradientProgram(program, input)
  SourceLoc loc;       // the <gradient> element
};

struct CustomOpSpec {
  OpDef def; // inputs with their dtypes filled in (f32, f16, bf16 when not given)
  std::shared_ptr<const Program> program;
  std::map<int, DeclaredGradient> gradients; // by input index
};

// `path` names the file in errors and in each op's `source`.
Expected<std::vector<CustomOpSpec>> parseCustomOpFile(std::string_view xml,
                                                      const std::string &path);

// Errors unless the compute fits the op's kind: an elementwise op reads every
// input at the output's indices, a broadcast op at a subsequence of them, and
// neither reduces.
Status checkKind(const OpDef &def, const Program &program);

} // namespace kiln::ops::custom
