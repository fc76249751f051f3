#include "tests/support/pass_test_util.h"

#include <cmath>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/model_loader.h"
#include "ops/op_builder.h"
#include "ops/op_verifier.h"
#include "tests/support/random.h"

namespace kiln::testing {

TinyTrainingStep tinyTrainingStep(DType dtype, int64_t batch, int64_t seq) {
  frontend::ModelOptions options;
  options.batch = batch;
  options.seq = seq;
  options.dtype = dtype;
  auto model = frontend::loadModel(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json",
                                   options);
  EXPECT_TRUE(model) << model.message();
  autodiff::TrainingStepOptions train_options;
  auto train = autodiff::buildTrainingStep(model->graph, train_options);
  EXPECT_TRUE(train) << train.message();

  TinyTrainingStep step{std::move(*train), {}};
  auto weights = frontend::initDecoderWeights(*model->config, 11);
  uint64_t seed = 100;
  for (const GraphInput &in : step.graph.inputs()) {
    const TensorType &type = step.graph.type(in.value);
    if (in.role == InputRole::Parameter)
      step.feed[in.name] = weights.at(in.name).castTo(type.dtype);
    else if (in.name == "input_ids" || in.name == "labels")
      step.feed[in.name] = randomIndices(type, 5, model->config->vocab_size);
    else if (type.dtype == DType::I64)
      step.feed[in.name] = Tensor::fromInts(DType::I64, type.shape, {3});
    else if (in.name == "lr")
      step.feed[in.name] = Tensor::scalar(DType::F32, 1e-3);
    else if (in.name.rfind("adam.v.", 0) == 0)
      step.feed[in.name] = randomTensor(type, seed++, 0.0f, 1e-4f);
    else
      step.feed[in.name] = randomTensor(type, seed++, -1e-2f, 1e-2f);
  }
  return step;
}

int64_t tinyQwenLayers() {
  auto c =
      frontend::readDecoderConfig(std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json");
  EXPECT_TRUE(c) << c.message();
  return c ? c->num_hidden_layers : 0;
}

void expectSwitchedOffFusesNothing(const std::string &pass) {
  TinyTrainingStep step = tinyTrainingStep(DType::F16);
  passes::PipelineReport report =
      runPasses(step.graph, contextFor("ascend910b", {switchPasses({{pass, false}})}));
  ASSERT_NE(report.find(pass), nullptr);
  EXPECT_FALSE(report.find(pass)->ran);
  EXPECT_FALSE(step.graph.groups().empty()) << "the other fusion passes still run";
  for (const FusionGroup &grp : step.graph.groups())
    EXPECT_NE(grp.formed_by, pass) << grp.name;
}

Qwen14bTrainingStep qwen14bTrainingStep(DType dtype) {
  frontend::ModelOptions options;
  options.batch = 1;
  options.seq = 2048;
  options.dtype = dtype;
  auto model =
      frontend::loadModel(std::string(KILN_SOURCE_DIR) + "/examples/qwen-14b/config.json", options);
  EXPECT_TRUE(model) << model.message();
  if (!model)
    return {Graph("missing"), 0};
  auto train = autodiff::buildTrainingStep(model->graph, autodiff::TrainingStepOptions{});
  EXPECT_TRUE(train) << train.message();
  if (!train)
    return {Graph("missing"), 0};
  return {std::move(*train), model->config->num_hidden_layers};
}

passes::SwitchLayer switchPasses(const std::vector<std::pair<std::string, bool>> &settings,
                                 const std::string &source) {
  passes::SwitchLayer layer;
  layer.source = source;
  for (const auto &s : settings) {
    layer.passes.push_back(s);
    layer.locations.push_back(s.first);
    layer.listed_groups.push_back(std::nullopt);
  }
  return layer;
}

passes::SwitchLayer switchAll(passes::PassGroup group, bool on, const std::string &source) {
  passes::SwitchLayer layer;
  layer.source = source;
  layer.all[group] = on;
  return layer;
}

passes::PassContext contextFor(const std::string &target,
                               const std::vector<passes::SwitchLayer> &layers,
                               const passes::PassRegistry &registry) {
  auto t = target::loadTarget(target);
  EXPECT_TRUE(t) << t.message();
  auto res = passes::resolveSwitches(registry, layers, false);
  EXPECT_TRUE(res) << res.message();
  return passes::PassContext(*t, res ? res->enabled : std::map<std::string, bool>{},
                             res ? res->decided_by : std::map<std::string, std::string>{});
}

passes::PassContext onlyFusionPass(const std::string &target, const std::string &pass,
                                   const passes::PassRegistry &registry) {
  passes::SwitchLayer layer = switchPasses({{pass, true}});
  layer.all[passes::PassGroup::GraphFusion] = false;
  layer.all[passes::PassGroup::UBFusion] = false;
  return contextFor(target, {layer}, registry);
}

passes::PassContext noFusion(const std::string &target, const passes::PassRegistry &registry) {
  passes::SwitchLayer layer;
  layer.source = "test";
  layer.all[passes::PassGroup::GraphFusion] = false;
  layer.all[passes::PassGroup::UBFusion] = false;
  return contextFor(target, {layer}, registry);
}

passes::PipelineReport runPasses(Graph &graph, const passes::PassContext &ctx,
                                 const passes::PassRegistry &registry) {
  passes::PassManager manager(registry, ctx);
  auto report = manager.run(graph);
  EXPECT_TRUE(report) << report.message();
  return report ? *report : passes::PipelineReport{};
}

passes::PassResult runOnePass(Graph &graph, const std::string &name, const passes::PassContext &ctx,
                              bool verify) {
  const passes::Pass *pass = passes::PassRegistry::builtin().find(name);
  EXPECT_NE(pass, nullptr) << name << " is not registered";
  if (!pass)
    return {};
  auto result = pass->run(graph, ctx);
  EXPECT_TRUE(result) << result.message();
  if (verify) {
    Status compacted = graph.compact();
    EXPECT_TRUE(compacted.isOk()) << compacted.message();
    Status verified = ops::verifyGraph(graph);
    EXPECT_TRUE(verified.isOk()) << verified.message();
  }
  return result ? *result : passes::PassResult{};
}

passes::PassResult runOnePass(Graph &graph, const std::string &name, const std::string &target) {
  return runOnePass(graph, name, contextFor(target));
}

std::string reasonFor(const passes::PassResult &result, const std::string &node) {
  for (const passes::Rejection &rej : result.rejections)
    if (rej.node == node)
      return rej.reason;
  return "<no rejection for " + node + ">";
}

std::vector<std::string> groupMemberNames(const Graph &graph, const std::string &node) {
  NodeId id = graph.findNode(node);
  if (id == kNoNode || graph.node(id).group == kNoGroup)
    return {};
  const std::vector<std::vector<NodeId>> members = graph.groupMembers();
  std::vector<std::string> names;
  for (NodeId m : members[graph.node(id).group])
    names.push_back(graph.node(m).name);
  return names;
}

::testing::AssertionResult outputsAgree(const ops::TensorMap &expected,
                                        const ops::TensorMap &actual, double rtol, double atol) {
  for (const auto &[name, e] : expected) {
    auto it = actual.find(name);
    if (it == actual.end())
      return ::testing::AssertionFailure() << "output '" << name << "' is missing";
    const Tensor &a = it->second;
    if (!(a.type() == e.type()))
      return ::testing::AssertionFailure()
             << "output '" << name << "': type " << typeToString(a.type()) << " vs "
             << typeToString(e.type());
    for (int64_t i = 0; i < e.numElements(); ++i) {
      double x = isFloat(e.dtype()) ? e.getFloat(i) : static_cast<double>(e.getInt(i));
      double y = isFloat(a.dtype()) ? a.getFloat(i) : static_cast<double>(a.getInt(i));
      if (x == y || (std::isnan(x) && std::isnan(y)))
        continue; // equal infinities too: inf - inf is NaN
      if (!(std::abs(x - y) <= atol + rtol * std::abs(x)))
        return ::testing::AssertionFailure()
               << "output '" << name << "' element " << i << ": expected " << x << ", got " << y;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fusedMatchesUnfused(const Graph &fused, const Graph &unfused,
                                               const ops::TensorMap &feed, DType dtype) {
  auto a = ops::interpret(unfused, feed);
  if (!a)
    return ::testing::AssertionFailure() << "unfused: " << a.message();
  auto b = ops::interpret(fused, feed);
  if (!b)
    return ::testing::AssertionFailure() << "fused: " << b.message();
  double rtol = dtype == DType::F32 ? 1e-5 : dtype == DType::F16 ? 2e-2 : 6e-2;
  return outputsAgree(*a, *b, rtol, rtol * 1e-2);
}

MatMulCase::MatMulCase(DType dtype, uint64_t seed) : seed(seed) {
  x = input("x", {dtype, {4, 8}});
  w = input("w", {dtype, {16, 8}});
  ops::OpBuilder b(g);
  mm = b.create("MatMul", "mm", {x, w}, {{"transpose_b", true}});
}

ValueId MatMulCase::input(const std::string &name, TensorType type) {
  feed[name] = randomTensor(type, seed + feed.size(), -1.0f, 1.0f);
  return g.addInput(name, std::move(type), InputRole::Data);
}

} // namespace kiln::testing
