// A custom op made ready for the registry: its definition and implementation
// (shape inference and reference kernel from the compute, and a gradient
// rule), plus the ops its gradient uses, "<Op>Grad<k>" per input k, derived
// symbolically (derivative.h) or declared in the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/custom/ast.h"
#include "ops/custom/custom_op_file.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops::custom {

struct BuiltOp {
  OpDef def;   // def.compute holds the program's text
  OpImpl impl; // impl.compute: what the kernel lowering compiles
};

struct CustomOpSet {
  std::vector<BuiltOp> ops; // the op first, then its gradient ops
  // Why the op has no gradient rule (empty when it has one): an input whose
  // gradient can be neither derived nor was declared.
  std::string no_gradient;
};

Expected<CustomOpSet> buildCustomOps(const CustomOpSpec &spec);

} // namespace kiln::ops::custom
