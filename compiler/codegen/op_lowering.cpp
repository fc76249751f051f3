#include "compiler/codegen/op_lowering.h"

#include <map>

namespace kiln::codegen {
namespace {

std::map<std::string, LowerFn, std::less<>> &loweringTable() {
  static std::map<std::string, LowerFn, std::less<>> table;
  return table;
}

} // namespace

LowerContext::LowerContext(const Node &node, std::vector<TensorType> input_types,
                           std::vector<TensorType> output_types, std::vector<int> input_buffers,
                           KernelProgram &program, int &next_rvar)
    : node_(node), input_types_(std::move(input_types)), output_types_(std::move(output_types)),
      input_buffers_(std::move(input_buffers)), program_(program), next_rvar_(next_rvar) {}

ExprRef LowerContext::input(size_t i, std::vector<ExprRef> indices) const {
  return load(input_buffers_[i], scalarTypeOf(input_types_[i].dtype), std::move(indices));
}

ExprRef LowerContext::broadcastInput(size_t i, const Shape &out_shape) const {
  return broadcastInput(i, out_shape, vars(out_shape.size()));
}

ExprRef LowerContext::broadcastInput(size_t i, const Shape &out_shape,
                                     const std::vector<ExprRef> &out_indices) const {
  const Shape &in_shape = input_types_[i].shape;
  const size_t lead = out_shape.size() - in_shape.size();
  std::vector<ExprRef> indices;
  for (size_t d = 0; d < in_shape.size(); ++d)
    indices.push_back(in_shape[d] == 1 && out_shape[lead + d] != 1 ? iconst(0)
                                                                   : out_indices[lead + d]);
  return input(i, std::move(indices));
}

std::vector<ExprRef> LowerContext::vars(size_t rank) {
  std::vector<ExprRef> v;
  for (size_t d = 0; d < rank; ++d)
    v.push_back(var(static_cast<int>(d)));
  return v;
}

int LowerContext::addStage(const std::string &label, Shape shape, ScalarType type, ExprRef body,
                           bool held) {
  program_.stages.push_back(
      Stage{node_.name + "." + label, std::move(shape), type, std::move(body), false, held});
  return program_.stageBuffer(static_cast<int>(program_.stages.size()) - 1);
}

ExprRef LowerContext::read(int buffer, std::vector<ExprRef> indices) const {
  const ScalarType type = program_.isInput(buffer) ? scalarTypeOf(program_.inputs[buffer].dtype)
                                                   : program_.stageOf(buffer).type;
  return load(buffer, type, std::move(indices));
}

void LowerContext::callLibrary(std::string symbol, std::vector<int64_t> args) {
  program_.library = std::move(symbol);
  program_.library_args = std::move(args);
}

void LowerContext::callLibrary(std::string symbol, std::vector<int64_t> args,
                               std::vector<std::pair<size_t, size_t>> outputs, int rows_rank) {
  callLibrary(std::move(symbol), std::move(args));
  program_.library_outputs = std::move(outputs);
  program_.library_rows_rank = rows_rank;
}

Error LowerContext::error(const std::string &message) const {
  return Error("node '" + node_.name + "' (" + node_.op + "): " + message);
}

const LowerFn *findLowering(std::string_view op) {
  auto &table = loweringTable();
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

std::vector<std::string> loweredOps() {
  std::vector<std::string> names;
  for (const auto &[name, fn] : loweringTable())
    names.push_back(name);
  return names;
}

bool registerLowering(const char *op, LowerFn fn) {
  return loweringTable().emplace(op, std::move(fn)).second;
}

} // namespace kiln::codegen
