// CANN's op type names in kiln's op vocabulary, so that modify_mixlist and
// keep_dtype files written for CANN read as is. The one table; the same
// table is in docs/precision.md ("CANN op types"), checked by a test.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::passes {

struct CannOpType {
  std::string_view cann;              // CANN's op type ("SoftmaxV2")
  std::vector<std::string_view> kiln; // the kiln op types it stands for
};

// Every CANN name kiln maps, in the order of the docs' table. A name kiln
// itself has (Softmax, MatMul, Cast, Mul, Exp, ...) is not listed: it is
// already the same op.
const std::vector<CannOpType> &cannOpTypes();

// The kiln op types `name` stands for: itself when `registry` has it, else
// the table's ops for a CANN name. An unknown name is an error, "unknown op
// type 'X' (did you mean A, B?)", suggesting kiln's and CANN's names.
Expected<std::vector<std::string>>
resolveOpType(std::string_view name, const ops::OpRegistry &registry = ops::OpRegistry::builtin());

// "SoftmaxV2 (kiln's Softmax)" for a CANN name, the name itself otherwise.
std::string describeOpType(std::string_view name, const std::vector<std::string> &kiln_ops);

} // namespace kiln::passes
