#include "compiler/autodiff/training_step.h"

#include "compiler/autodiff/autodiff.h"
#include "ops/op_builder.h"
#include "ops/op_verifier.h"

namespace kiln::autodiff {
namespace {

// What every AdamW update reads besides the parameter: the learning rate and
// the step count, which the update advances ("adam.step" + 1, an output).
struct AdamCounters {
  ValueId lr = kNoValue;
  ValueId t = kNoValue;
};

AdamCounters addAdamCounters(Graph &graph, ops::OpBuilder &b) {
  ValueId step =
      graph.addInput(kAdamStepName, TensorType{DType::I64, {}}, InputRole::OptimizerState);
  AdamCounters c;
  c.lr = graph.addInput(kLearningRateName, TensorType{DType::F32, {}}, InputRole::Hyperparameter);
  c.t = b.create("Add", "step", {step, b.constant(1, DType::I64, "one")});
  graph.addOutput(kAdamStepName, c.t);
  return c;
}

AttrMap adamAttrs(const TrainingStepOptions &options) {
  return AttrMap{{"beta1", options.beta1},
                 {"beta2", options.beta2},
                 {"eps", options.eps},
                 {"weight_decay", options.weight_decay}};
}

} // namespace

Expected<ValueId> lossOutput(const Graph &forward, const std::string &name) {
  std::string outputs;
  for (const GraphOutput &out : forward.outputs())
    outputs +=
        (outputs.empty() ? "" : ", ") + out.name + " " + typeToString(forward.type(out.value));
  const GraphOutput *loss = forward.findOutput(name);
  if (!loss)
    return Error("graph '" + forward.name() + "' has no output named '" + name +
                 "' to train on (its outputs: " + outputs + ")");
  const TensorType &type = forward.type(loss->value);
  if (!type.shape.empty() || !isFloat(type.dtype))
    return Error("output '" + name + "' of graph '" + forward.name() + "' is " +
                 typeToString(type) +
                 ": the loss to train on must be a scalar float (its outputs: " + outputs + ")");
  return loss->value;
}

Expected<Graph> buildTrainingStep(const Graph &forward, const TrainingStepOptions &options) {
  KILN_ASSIGN_OR_RETURN(ValueId loss_value, lossOutput(forward, options.loss));
  Graph graph = forward;
  graph.setName(forward.name() + "_train");
  std::vector<GraphOutput> &outputs = graph.mutableOutputs();
  std::erase_if(outputs, [&](const GraphOutput &out) {
    return out.name != options.loss && !options.keep_outputs &&
           !(options.keep_logits && out.name == "logits");
  });

  std::vector<GraphInput> params;
  for (const GraphInput &in : forward.inputs())
    if (in.role == InputRole::Parameter)
      params.push_back(in);
  std::vector<ValueId> wrt;
  for (const GraphInput &p : params)
    wrt.push_back(p.value);

  ops::OpBuilder b(graph);
  ValueId target = loss_value;
  if (options.loss_scale_input) {
    ValueId scale =
        graph.addInput(kLossScaleName, TensorType{DType::F32, {}}, InputRole::Hyperparameter);
    const DType loss_dtype = graph.type(loss_value).dtype;
    if (loss_dtype != DType::F32)
      scale = b.create("Cast", "loss_scale.cast", {scale}, {{"dtype", loss_dtype}});
    target = b.create("Mul", "loss_scale.scaled_loss", {loss_value, scale});
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> grads, gradients(b, target, wrt));

  if (options.grad_norm) {
    auto scope = b.scope("grad_norm");
    std::vector<ValueId> squares;
    for (size_t i = 0; i < params.size(); ++i) {
      ValueId g = grads[i];
      if (graph.type(g).dtype != DType::F32)
        g = b.create("Cast", "cast", {g}, {{"dtype", DType::F32}});
      squares.push_back(b.create("ReduceSum", "sumsq", {b.create("Mul", "square", {g, g})}));
    }
    ValueId total = squares.size() == 1 ? squares[0] : b.create("AddN", "total", squares);
    graph.addOutput("grad_norm", b.create("Sqrt", "sqrt", {total}));
  }
  if (options.output_gradients)
    for (size_t i = 0; i < params.size(); ++i)
      graph.addOutput(gradientName(params[i].name), grads[i]);

  if (options.optimizer) {
    auto scope = b.scope("optimizer");
    const auto [lr, t] = addAdamCounters(graph, b);
    const AttrMap adam_attrs = adamAttrs(options);
    for (size_t i = 0; i < params.size(); ++i) {
      const TensorType state{DType::F32, graph.type(params[i].value).shape};
      ValueId m = graph.addInput(adamMomentName(params[i].name), state, InputRole::OptimizerState);
      ValueId v =
          graph.addInput(adamVelocityName(params[i].name), state, InputRole::OptimizerState);
      std::vector<ValueId> updated = b.createMulti(
          "AdamW", params[i].name, {params[i].value, grads[i], m, v, lr, t}, adam_attrs);
      if (updated.size() != 3)
        break; // the builder holds the error
      graph.addOutput(params[i].name, updated[0]);
      graph.addOutput(adamMomentName(params[i].name), updated[1]);
      graph.addOutput(adamVelocityName(params[i].name), updated[2]);
    }
  }
  KILN_RETURN_IF_ERROR(b.status());
  KILN_RETURN_IF_ERROR(ops::verifyGraph(graph));
  return graph;
}

Expected<Graph> buildOptimizerStep(const std::vector<std::pair<std::string, TensorType>> &params,
                                   const TrainingStepOptions &options,
                                   const std::map<std::string, DType> &compute_copies) {
  Graph graph("optimizer");
  ops::OpBuilder b(graph);
  const auto [lr, t] = addAdamCounters(graph, b);
  ValueId grad_scale =
      graph.addInput(kGradScaleName, TensorType{DType::F32, {}}, InputRole::Hyperparameter);
  const AttrMap adam_attrs = adamAttrs(options);
  for (const auto &[name, type] : params) {
    const TensorType state{DType::F32, type.shape};
    ValueId p = graph.addInput(name, type, InputRole::Parameter);
    ValueId g = graph.addInput(gradientName(name), state, InputRole::Data);
    ValueId m = graph.addInput(adamMomentName(name), state, InputRole::OptimizerState);
    ValueId v = graph.addInput(adamVelocityName(name), state, InputRole::OptimizerState);
    auto scope = b.scope(name);
    ValueId scaled = b.create("Mul", "grad", {g, grad_scale});
    if (type.dtype != DType::F32)
      scaled = b.create("Cast", "grad_cast", {scaled}, {{"dtype", type.dtype}});
    std::vector<ValueId> updated =
        b.createMulti("AdamW", "adamw", {p, scaled, m, v, lr, t}, adam_attrs);
    if (updated.size() != 3)
      break; // the builder holds the error
    graph.addOutput(name, updated[0]);
    graph.addOutput(adamMomentName(name), updated[1]);
    graph.addOutput(adamVelocityName(name), updated[2]);
    if (auto copy = compute_copies.find(name); copy != compute_copies.end()) {
      graph.addInput(weightCopyName(name), {copy->second, type.shape}, InputRole::WeightCopy);
      graph.addOutput(weightCopyName(name),
                      b.create("Cast", "compute_copy", {updated[0]}, {{"dtype", copy->second}}));
    }
  }
  KILN_RETURN_IF_ERROR(b.status());
  KILN_RETURN_IF_ERROR(ops::verifyGraph(graph));
  return graph;
}

} // namespace kiln::autodiff
