#include "tests/support/gradient_check.h"

#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "tests/support/random.h"

namespace kiln::testing {

using ops::TensorMap;

namespace {

double weightedSum(const TensorMap &outputs, const TensorMap &cotangents) {
  double total = 0;
  for (const auto &[name, w] : cotangents) {
    const Tensor &out = outputs.at(name.substr(4)); // "cot_out_k" -> "out_k"
    for (int64_t i = 0; i < out.numElements(); ++i)
      total += static_cast<double>(out.getFloat(i)) * w.getFloat(i);
  }
  return total;
}

} // namespace

::testing::AssertionResult checkOpGradient(std::string_view op,
                                           const std::vector<GradCheckInput> &inputs,
                                           const AttrMap &attrs, const GradCheckOptions &options) {
  Graph graph("gradcheck_" + std::string(op));
  graph.setVocabulary(options.ops);
  std::vector<ValueId> args;
  TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "in_" + std::to_string(i);
    args.push_back(graph.addInput(name, inputs[i].type, InputRole::Data));
    feed[name] = inputs[i].value ? *inputs[i].value
                                 : randomTensor(inputs[i].type, options.seed * 1000 + i,
                                                inputs[i].lo, inputs[i].hi);
  }
  ops::OpBuilder b(graph);
  auto outs = b.tryCreate(op, "op", args, attrs);
  if (!outs)
    return ::testing::AssertionFailure() << "building " << op << ": " << outs.message();
  const Node node = graph.node(graph.value((*outs)[0]).producer);

  TensorMap cotangents;
  std::vector<ValueId> output_grads;
  for (size_t k = 0; k < outs->size(); ++k) {
    const TensorType t = graph.type((*outs)[k]); // a copy: addInput below grows the graph
    std::string out_name = "out_" + std::to_string(k);
    graph.addOutput(out_name, (*outs)[k]);
    if (!isFloat(t.dtype)) {
      output_grads.push_back(kNoValue);
      continue;
    }
    std::string cot_name = "cot_" + out_name;
    output_grads.push_back(graph.addInput(cot_name, t, InputRole::Data));
    cotangents[cot_name] = randomTensor(t, options.seed * 7919 + k);
  }
  const ops::RegisteredOp *reg = ops::opsOf(graph).find(op);
  if (!reg->impl.grad)
    return ::testing::AssertionFailure() << op << " has no gradient rule";
  ops::GradContext ctx{b, node, output_grads};
  auto grads = reg->impl.grad(ctx);
  if (!grads)
    return ::testing::AssertionFailure() << "gradient of " << op << ": " << grads.message();
  if (!b.status())
    return ::testing::AssertionFailure() << "gradient of " << op << ": " << b.status().message();
  if (grads->size() != inputs.size())
    return ::testing::AssertionFailure() << op << " gradient returned " << grads->size()
                                         << " values for " << inputs.size() << " inputs";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].differentiable)
      continue;
    if ((*grads)[i] == kNoValue)
      return ::testing::AssertionFailure() << op << " gives no gradient for input " << i;
    if (!(graph.type((*grads)[i]) == inputs[i].type))
      return ::testing::AssertionFailure()
             << op << " gradient of input " << i << " is " << typeToString(graph.type((*grads)[i]))
             << ", expected " << typeToString(inputs[i].type);
    graph.addOutput("grad_" + std::to_string(i), (*grads)[i]);
  }

  TensorMap all = feed;
  all.insert(cotangents.begin(), cotangents.end());
  auto analytic = ops::interpret(graph, all);
  if (!analytic)
    return ::testing::AssertionFailure() << "running " << op << ": " << analytic.message();

  std::ostringstream failures;
  int failed = 0;
  std::mt19937_64 rng(options.seed);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].differentiable)
      continue;
    const Tensor &grad = analytic->at("grad_" + std::to_string(i));
    const std::string in_name = "in_" + std::to_string(i);
    std::vector<int64_t> probe(feed[in_name].numElements());
    std::iota(probe.begin(), probe.end(), 0);
    std::shuffle(probe.begin(), probe.end(), rng);
    if (static_cast<int>(probe.size()) > options.max_elements)
      probe.resize(options.max_elements);
    for (int64_t j : probe) {
      TensorMap plus = all, minus = all;
      float x = feed[in_name].getFloat(j);
      plus[in_name].setFloat(j, x + static_cast<float>(options.eps), OverflowMode::InfNan);
      minus[in_name].setFloat(j, x - static_cast<float>(options.eps), OverflowMode::InfNan);
      auto lp = ops::interpret(graph, plus);
      auto lm = ops::interpret(graph, minus);
      if (!lp || !lm)
        return ::testing::AssertionFailure() << "running " << op << " perturbed";
      double numeric =
          (weightedSum(*lp, cotangents) - weightedSum(*lm, cotangents)) / (2 * options.eps);
      double exact = grad.getFloat(j);
      double tol = options.atol + options.rtol * std::max(std::abs(numeric), std::abs(exact));
      if (!(std::abs(numeric - exact) <= tol) && failed++ < 5)
        failures << "\n  input " << i << " element " << j << ": rule " << exact
                 << ", finite difference " << numeric;
    }
  }
  if (failed)
    return ::testing::AssertionFailure()
           << op << ": " << failed << " gradient elements disagree" << failures.str();
  return ::testing::AssertionSuccess();
}

} // namespace kiln::testing
