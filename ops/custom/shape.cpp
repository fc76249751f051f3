#include "ops/custom/shape.h"

namespace kiln::ops::custom {

Status checkInputRanks(const Program &program, const std::vector<Shape> &inputs) {
  const Where where = program.where();
  if (inputs.size() != program.inputs.size())
    return where.error("expected " + std::to_string(program.inputs.size()) + " inputs, got " +
                       std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int rank = program.input_ranks[i];
    if (static_cast<int>(inputs[i].size()) != rank) {
      std::string at = program.input_locs[i].line > 0
                           ? "the compute reads it with " + std::to_string(rank) + " ind" +
                                 (rank == 1 ? "ex" : "ices") + " at " +
                                 locString(program.input_locs[i])
                           : "its rank is " + std::to_string(rank);
      return where.error("input '" + program.inputs[i] + "' has shape " + shapeToString(inputs[i]) +
                         ", but " + at + ": expected rank " + std::to_string(rank));
    }
  }
  return Status::ok();
}

Expected<std::vector<int64_t>> variableExtents(const Program &program, const Statement &stmt,
                                               const std::vector<Shape> &inputs) {
  const Where where = program.where();
  std::vector<int64_t> extents(stmt.vars.size(), -1);
  for (size_t v = 0; v < stmt.vars.size(); ++v) {
    const IndexVar &var = stmt.vars[v];
    const AxisUse *first = nullptr;
    for (const AxisUse &use : var.uses) {
      const int64_t extent = inputs[use.input][use.axis];
      if (!first) {
        first = &use;
        extents[v] = extent;
        continue;
      }
      if (extent != extents[v]) {
        auto axis = [&](const AxisUse &u) {
          return "axis " + std::to_string(u.axis) + " of " + program.inputs[u.input] + " " +
                 shapeToString(inputs[u.input]);
        };
        std::string first_at = first->loc.line > 0 ? " at " + locString(first->loc) : "";
        return where.error(use.loc, "index '" + var.name + "' has extent " +
                                        std::to_string(extent) + " from " + axis(use) + " but " +
                                        std::to_string(extents[v]) + " from " + axis(*first) +
                                        first_at +
                                        ": expected every axis an index walks to have one extent");
      }
    }
  }
  return extents;
}

Expected<std::vector<TensorType>>
inferOutputs(const Program &program, const std::vector<TensorType> &inputs,
             const std::vector<std::optional<DType>> &output_dtypes) {
  const Where where = program.where();
  std::vector<Shape> shapes;
  for (const TensorType &t : inputs)
    shapes.push_back(t.shape);
  KILN_RETURN_IF_ERROR(checkInputRanks(program, shapes));
  std::vector<TensorType> out;
  for (const Statement &stmt : program.statements) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> extents, variableExtents(program, stmt, shapes));
    TensorType t;
    for (int v : stmt.out_vars)
      t.shape.push_back(extents[v]);
    if (stmt.output < static_cast<int>(output_dtypes.size()) && output_dtypes[stmt.output]) {
      t.dtype = *output_dtypes[stmt.output];
    } else if (stmt.like_input >= 0) {
      t.dtype = inputs[stmt.like_input].dtype;
    } else {
      if (inputs.empty())
        return where.error("output '" + program.outputs[stmt.output] +
                           "' has no dtype: the op has no input to take it from; give the "
                           "output one dtype (dtypes=\"f32\")");
      t.dtype = inputs[0].dtype;
      for (size_t i = 1; i < inputs.size(); ++i)
        if (inputs[i].dtype != t.dtype)
          return where.error("inputs '" + program.inputs[0] + "' (" +
                             std::string(dtypeName(t.dtype)) + ") and '" + program.inputs[i] +
                             "' (" + std::string(dtypeName(inputs[i].dtype)) +
                             ") differ in dtype: expected one dtype for all inputs, which the "
                             "outputs take (or an output with one dtype in dtypes=)");
    }
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace kiln::ops::custom
