#include "ops/custom/custom_op.h"

#include <algorithm>
#include <optional>

#include "ops/custom/derivative.h"
#include "ops/custom/evaluator.h"
#include "ops/custom/shape.h"
#include "ops/op_builder.h"

namespace kiln::ops::custom {
namespace {

OpImpl implOf(std::shared_ptr<const Program> program, std::vector<std::optional<DType>> dtypes,
              GradFn grad) {
  OpImpl impl;
  impl.infer = [program, dtypes](const std::vector<TensorType> &inputs, const AttrMap &) {
    return inferOutputs(*program, inputs, dtypes);
  };
  impl.kernel = [program](const KernelContext &ctx, const std::vector<const Tensor *> &inputs,
                          std::vector<Tensor> &outputs, const AttrMap &attrs) {
    return evaluateProgram(*program, ctx, inputs, outputs, attrs);
  };
  impl.grad = std::move(grad);
  impl.compute = std::move(program);
  return impl;
}

// dx_k = <Op>Grad<k>(inputs..., dy...) for every input; an output no gradient
// reaches contributes zeros.
GradFn gradRule(const OpDef &def, std::vector<std::string> grad_ops) {
  std::vector<std::string> inputs, outputs;
  for (const OperandDef &in : def.inputs)
    inputs.push_back(in.name);
  for (const OperandDef &out : def.outputs)
    outputs.push_back(out.name);
  return [grad_ops, inputs, outputs](GradContext &ctx) -> Expected<std::vector<ValueId>> {
    OpBuilder &b = ctx.builder;
    std::vector<ValueId> args(ctx.node.inputs.begin(), ctx.node.inputs.end());
    for (size_t k = 0; k < outputs.size(); ++k) {
      ValueId dy = ctx.output_grads[k];
      if (dy == kNoValue) {
        const TensorType t = b.type(ctx.output(k)); // a copy: the graph grows
        dy = b.constant(0.0, t.dtype, "zero_d" + outputs[k], t.shape);
      }
      args.push_back(dy);
    }
    std::vector<ValueId> grads;
    for (size_t i = 0; i < inputs.size(); ++i)
      grads.push_back(b.create(grad_ops[i], "d" + inputs[i], args, ctx.attrs()));
    return grads;
  };
}

std::vector<std::optional<DType>> outputDTypes(const OpDef &def) {
  std::vector<std::optional<DType>> out;
  for (const OperandDef &o : def.outputs)
    out.push_back(o.dtypes.size() == 1 ? std::optional<DType>(o.dtypes[0]) : std::nullopt);
  return out;
}

} // namespace

Expected<CustomOpSet> buildCustomOps(const CustomOpSpec &spec) {
  const Program &program = *spec.program;
  CustomOpSet set;
  std::vector<BuiltOp> grads;
  std::vector<std::string> grad_names;
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const int input = static_cast<int>(i);
    auto skeleton = gradientProgram(program, input);
    if (!skeleton) {
      set.no_gradient = skeleton.message();
      break;
    }
    Program grad = std::move(*skeleton);
    OpDef def;
    def.name = grad.op;
    def.source = spec.def.source;
    auto declared = spec.gradients.find(input);
    if (declared != spec.gradients.end()) {
      grad.statements = {declared->second.statement};
      def.source = program.file + ":" + std::to_string(declared->second.loc.line);
      def.summary =
          "Gradient of " + spec.def.name + " in '" + program.inputs[i] + "', as declared: ";
    } else {
      auto derived = deriveGradient(program, input);
      if (!derived) {
        set.no_gradient = derived.message();
        break;
      }
      grad.statements = {std::move(*derived)};
      def.summary = "Gradient of " + spec.def.name + " in '" + program.inputs[i] + "', derived: ";
    }
    def.compute = programText(grad);
    def.summary += def.compute;
    def.kind = *parseOpKind(statementKind(grad.statements[0]));
    def.inputs = spec.def.inputs;
    std::vector<DType> floats;
    for (const OperandDef &in : spec.def.inputs)
      for (DType d : in.dtypes)
        if (std::find(floats.begin(), floats.end(), d) == floats.end())
          floats.push_back(d);
    for (size_t k = 0; k < spec.def.outputs.size(); ++k) {
      const OperandDef &out = spec.def.outputs[k];
      def.inputs.push_back(OperandDef{grad.inputs[program.inputs.size() + k],
                                      out.dtypes.empty() ? floats : out.dtypes, false, false});
    }
    def.outputs = {OperandDef{grad.outputs[0], {}, false, false}};
    def.attrs = spec.def.attrs;
    auto shared = std::make_shared<const Program>(std::move(grad));
    grads.push_back(BuiltOp{def, implOf(shared, {std::nullopt}, nullptr)});
    grad_names.push_back(def.name);
  }

  BuiltOp op;
  op.def = spec.def;
  op.def.compute = programText(program);
  const bool differentiable = set.no_gradient.empty();
  op.impl = implOf(spec.program, outputDTypes(spec.def),
                   differentiable ? gradRule(spec.def, grad_names) : GradFn());
  set.ops.push_back(std::move(op));
  if (differentiable)
    for (BuiltOp &g : grads)
      set.ops.push_back(std::move(g));
  return set;
}

} // namespace kiln::ops::custom
