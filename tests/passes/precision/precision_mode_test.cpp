// Precision rewriting end to end on the tiny Qwen training step: the mixed
// modes stay close to force_fp32, the fp32 attention fix prevents the fp16
// overflow it exists for, mixlist and keep_dtype edits move exactly the
// named ops, and the required pass cannot be switched off.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/frontend/decoder_init.h"
#include "ops/op_builder.h"
#include "tests/support/pass_test_util.h"

namespace kiln::driver {
namespace {

using kiln::testing::TinyTrainingStep;

ResolvedJob precisionJob(passes::PrecisionMode mode, std::vector<std::string> disable = {},
                         std::optional<OverflowMode> overflow = std::nullopt) {
  JobSettings cli;
  cli.precision_mode = mode;
  cli.disable_passes = std::move(disable);
  cli.overflow = overflow;
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  EXPECT_TRUE(job) << job.message();
  return std::move(*job);
}

struct StepResult {
  double loss = 0, grad_norm = 0;
};

// The tiny step built in f32 (the job's dtype), compiled by `job`, run once.
StepResult runStep(const ResolvedJob &job, double c_attn_scale = 1.0) {
  TinyTrainingStep step = kiln::testing::tinyTrainingStep(job.dtype);
  if (c_attn_scale != 1.0) {
    std::map<std::string, Tensor> weights;
    for (auto &[name, t] : step.feed)
      if (name.find("attn.c_attn.weight") != std::string::npos)
        weights[name] = t;
    EXPECT_TRUE(
        frontend::scaleWeights(weights, "transformer.h.*.attn.c_attn.weight", c_attn_scale).isOk());
    for (auto &[name, t] : weights)
      step.feed[name] = t;
  }
  auto report = compileGraph(step.graph, job);
  EXPECT_TRUE(report) << report.message();
  ops::InterpretOptions options;
  options.overflow = job.overflow;
  auto out = ops::interpret(step.graph, step.feed, options);
  EXPECT_TRUE(out) << out.message();
  if (!out)
    return {};
  return {out->at("loss").getFloat(0), out->at("grad_norm").getFloat(0)};
}

bool near(double a, double reference, double rtol) {
  return std::abs(a - reference) <= rtol * std::abs(reference);
}

TEST(PrecisionMode, MixedModesStayCloseToForceFp32) {
  const StepResult fp32 = runStep(precisionJob(passes::PrecisionMode::ForceFp32));
  for (auto mode : {passes::PrecisionMode::AllowMixPrecisionFp16,
                    passes::PrecisionMode::AllowMixPrecisionBf16}) {
    const StepResult mixed = runStep(precisionJob(mode));
    EXPECT_TRUE(near(mixed.loss, fp32.loss, 1e-2))
        << passes::precisionModeName(mode) << ": " << mixed.loss << " vs " << fp32.loss;
    EXPECT_TRUE(near(mixed.grad_norm, fp32.grad_norm, 1e-2))
        << passes::precisionModeName(mode) << ": " << mixed.grad_norm << " vs " << fp32.grad_norm;
  }
}

// Scaled QKV weights push QK^T past 65504: in fp16 the scores overflow.
TEST(PrecisionMode, AttentionFp32PreventsTheOverflow) {
  const double scale = 2000;
  const StepResult fp32 = runStep(precisionJob(passes::PrecisionMode::ForceFp32), scale);
  ASSERT_TRUE(std::isfinite(fp32.loss));

  const StepResult broken = runStep(
      precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16, {"AttentionFp32CastPass"}), scale);
  EXPECT_FALSE(std::isfinite(broken.loss)) << "infnan: the overflow reaches the loss";

  const StepResult saturated =
      runStep(precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16, {"AttentionFp32CastPass"},
                           OverflowMode::Saturation),
              scale);
  EXPECT_TRUE(std::isfinite(saturated.loss));
  EXPECT_FALSE(near(saturated.grad_norm, fp32.grad_norm, 0.5))
      << "saturation hides the overflow but visibly changes the result: " << saturated.grad_norm
      << " vs " << fp32.grad_norm;

  const StepResult fixed =
      runStep(precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16), scale);
  EXPECT_TRUE(near(fixed.loss, fp32.loss, 1e-2)) << fixed.loss << " vs " << fp32.loss;
  EXPECT_TRUE(near(fixed.grad_norm, fp32.grad_norm, 1e-2))
      << fixed.grad_norm << " vs " << fp32.grad_norm;
}

// The dtype of each node's first output after compiling with `job` (and,
// under "<name>#in0", of its first input).
std::map<std::string, DType> dtypesAfter(const ResolvedJob &job) {
  TinyTrainingStep step = kiln::testing::tinyTrainingStep(job.dtype);
  EXPECT_TRUE(compileGraph(step.graph, job));
  std::map<std::string, DType> out;
  for (const Node &n : step.graph.nodes()) {
    if (!n.outputs.empty())
      out[n.name] = step.graph.type(n.outputs[0]).dtype;
    if (!n.inputs.empty())
      out[n.name + "#in0"] = step.graph.type(n.inputs[0]).dtype;
  }
  return out;
}

TEST(PrecisionMode, WhiteBlackAndGrayPaint) {
  auto d = dtypesAfter(precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16));
  EXPECT_EQ(d.at("transformer.h.0.mlp.w1"), DType::F16) << "white: matmul";
  EXPECT_EQ(d.at("transformer.h.0.attn.scores"), DType::F32) << "attention fp32: fp32_out";
  EXPECT_EQ(d.at("transformer.h.0.attn.softmax"), DType::F32) << "black: softmax";
  EXPECT_EQ(d.at("transformer.h.0.mlp.act"), DType::F16) << "gray after a white op";
  EXPECT_EQ(d.at("transformer.h.0.ln_1.mean"), DType::F32) << "black: reduction";
}

// A biased qkv projection and the rotary tables do not lift the attention
// to f32 (autocast and MindFormers run it low); the residual stream, which
// adds a low matmul output to an f32 activation, stays f32.
TEST(PrecisionMode, BiasesAndRotaryTablesKeepTheAttentionLow) {
  auto d = dtypesAfter(precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16));
  // The bias add folds into the matmul later; its bias is cast for it.
  EXPECT_EQ(d.at("transformer.h.0.attn.c_attn.bias.to_f16"), DType::F16) << "a linear layer's bias";
  EXPECT_EQ(d.at("transformer.h.0.attn.c_attn.unflatten"), DType::F16);
  EXPECT_EQ(d.at("transformer.h.0.attn.rotary_q.add"), DType::F16) << "rotary tables: constants";
  EXPECT_EQ(d.at("transformer.h.0.attn.rotary_k.mul_cos"), DType::F16);
  EXPECT_EQ(d.at("transformer.h.0.attn.q_transpose"), DType::F16);
  EXPECT_EQ(d.at("transformer.h.0.attn_residual"), DType::F32) << "the residual stream";
  EXPECT_EQ(d.at("transformer.rotary_emb"), DType::F32) << "the tables themselves";
}

// Only a parameter is a linear layer's bias: an f32 data input added to a
// matmul's output keeps the add in f32, as the gray rule says.
TEST(PrecisionMode, OnlyAParameterIsALinearLayersBias) {
  Graph g("linear");
  const ValueId x = g.addInput("x", TensorType{DType::F32, {4, 8}}, InputRole::Data);
  const ValueId w = g.addInput("w", TensorType{DType::F32, {8, 8}}, InputRole::Parameter);
  const ValueId bias = g.addInput("bias", TensorType{DType::F32, {8}}, InputRole::Parameter);
  const ValueId shift = g.addInput("shift", TensorType{DType::F32, {8}}, InputRole::Data);
  ops::OpBuilder b(g);
  const ValueId y = b.create("MatMul", "proj", {x, w});
  g.addOutput("biased", b.create("BiasAdd", "biased", {y, bias}));
  const ValueId z = b.create("MatMul", "proj2", {x, w});
  g.addOutput("shifted", b.create("Add", "shifted", {z, shift}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  ASSERT_TRUE(compileGraph(g, precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16)));
  EXPECT_EQ(g.type(g.node(g.findNode("biased")).outputs[0]).dtype, DType::F16);
  EXPECT_EQ(g.type(g.node(g.findNode("shifted")).outputs[0]).dtype, DType::F32);
}

std::string writeTemp(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PrecisionMode, MixlistAndKeepDTypeMoveExactlyTheNamedOps) {
  const auto base = dtypesAfter(precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16));
  JobSettings cli;
  cli.precision_mode = passes::PrecisionMode::AllowMixPrecisionFp16;
  cli.modify_mixlist = writeTemp("mix.json", R"({"black-list": {"to-add": ["Silu"]}})");
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_TRUE(job) << job.message();
  const auto moved = dtypesAfter(*job);
  for (const auto &[name, dtype] : moved) {
    if (!base.count(name))
      continue; // casts the edit added
    if (name.find("mlp.act") != std::string::npos && name.find("grad") == std::string::npos) {
      EXPECT_EQ(dtype, DType::F32) << name;
    }
  }
  EXPECT_EQ(moved.at("transformer.h.0.mlp.w1"), DType::F16) << "other ops stay";

  JobSettings keep;
  keep.precision_mode = passes::PrecisionMode::AllowMixPrecisionFp16;
  keep.keep_dtype = writeTemp("keep.txt", "transformer.h.1.mlp.w1\n");
  auto kept_job = resolveJob(std::nullopt, keep, DType::F16);
  ASSERT_TRUE(kept_job) << kept_job.message();
  const auto kept = dtypesAfter(*kept_job);
  EXPECT_EQ(kept.at("transformer.h.1.mlp.w1"), DType::F32) << "kept in the model's f32";
  EXPECT_EQ(kept.at("transformer.h.0.mlp.w1"), DType::F16) << "the other layer's w1 is lowered";
}

ResolvedJob jobOn(const std::string &target, passes::PrecisionMode mode) {
  JobSettings cli;
  cli.target = target;
  cli.precision_mode = mode;
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  EXPECT_TRUE(job) << job.message();
  return std::move(*job);
}

// What force_fp32 and allow_fp32_to_fp16 do to a matmul depends on whether
// the target's cube takes f32.
TEST(PrecisionMode, CubeModesFollowTheTarget) {
  using passes::PrecisionMode;
  const std::string w1 = "transformer.h.0.mlp.w1", act = "transformer.h.0.mlp.act";
  auto b = dtypesAfter(jobOn("ascend910b", PrecisionMode::ForceFp32));
  EXPECT_EQ(b.at(w1), DType::F32);
  auto a = dtypesAfter(jobOn("ascend910", PrecisionMode::ForceFp32));
  EXPECT_EQ(a.at(w1), DType::F32) << "f16 in, f32 out (cube_fp16in_fp32out)";
  EXPECT_EQ(a.at(w1 + "#in0"), DType::F16) << "w1's input is cast for the cube";
  EXPECT_EQ(b.at(w1 + "#in0"), DType::F32);
  auto keep = dtypesAfter(jobOn("ascend910b", PrecisionMode::AllowFp32ToFp16));
  EXPECT_EQ(keep.at(w1), DType::F32) << "the 910B cube computes f32";
  auto lower = dtypesAfter(jobOn("ascend910", PrecisionMode::AllowFp32ToFp16));
  EXPECT_EQ(lower.at(w1), DType::F16) << "the 910 cube has no f32";
  EXPECT_EQ(lower.at(act), DType::F32) << "vector ops keep f32";
  auto f16 = dtypesAfter(jobOn("ascend910b", PrecisionMode::ForceFp16));
  EXPECT_EQ(f16.at(act), DType::F16);
  EXPECT_EQ(f16.at("transformer.h.0.ln_1.mean"), DType::F16);
}

TEST(PrecisionMode, AttentionFp32CanBeLimitedToLayers) {
  JobSettings cli;
  cli.precision_mode = passes::PrecisionMode::AllowMixPrecisionFp16;
  cli.attention_fp32_layers = std::set<int64_t>{1};
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_TRUE(job) << job.message();
  auto d = dtypesAfter(*job);
  EXPECT_EQ(d.at("transformer.h.1.attn.scores"), DType::F32);
  EXPECT_EQ(d.at("transformer.h.0.attn.scores"), DType::F16) << "layer 0 is not selected";
}

// After the precision passes no cast is an identity and no cast reads a
// widening cast: CastEliminationPass leaves no redundant pair.
TEST(PrecisionMode, NoRedundantCastsRemain) {
  for (auto mode :
       {passes::PrecisionMode::AllowMixPrecisionFp16, passes::PrecisionMode::AllowMixPrecisionBf16,
        passes::PrecisionMode::ForceFp16}) {
    TinyTrainingStep step = kiln::testing::tinyTrainingStep(DType::F32);
    ASSERT_TRUE(compileGraph(step.graph, precisionJob(mode)));
    const Graph &g = step.graph;
    for (const Node &n : g.nodes()) {
      if (n.op != "Cast")
        continue;
      const DType in = g.type(n.inputs[0]).dtype, out = g.type(n.outputs[0]).dtype;
      EXPECT_NE(in, out) << n.name << " is an identity cast";
      NodeId p = g.value(n.inputs[0]).producer;
      if (p != kNoNode && g.node(p).op == "Cast") {
        const DType source = g.type(g.node(p).inputs[0]).dtype;
        EXPECT_FALSE(source != DType::F32 && in == DType::F32)
            << g.node(p).name << " -> " << n.name << " is an exact pair left in place";
      }
    }
  }
}

TEST(PrecisionMode, ThePassMayNotBeDisabled) {
  JobSettings cli;
  cli.disable_passes = {"PrecisionModePass"};
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_FALSE(job);
  EXPECT_NE(job.message().find("may not be disabled: it applies the job's precision_mode"),
            std::string::npos)
      << job.message();
}

TEST(PrecisionMode, ReportListsEveryDecision) {
  TinyTrainingStep step = kiln::testing::tinyTrainingStep(DType::F32);
  auto report =
      compileGraph(step.graph, precisionJob(passes::PrecisionMode::AllowMixPrecisionFp16));
  ASSERT_TRUE(report) << report.message();
  nlohmann::json j = passes::reportToJson(*report, step.graph);
  bool saw_white = false, saw_attention = false;
  for (const auto &p : j["passes"])
    for (const auto &d : p.value("dtype_decisions", nlohmann::json::array())) {
      saw_white |= d["why"] == "white list" && d["to"] == "f16";
      saw_attention |= d["why"] == "attention fp32";
    }
  EXPECT_TRUE(saw_white);
  EXPECT_TRUE(saw_attention);
}

// CANN's force_lowerprecision: an f32 op takes bf16 where the chip has it,
// else f16; ops already in f16 keep it.
TEST(PrecisionMode, ForceLowerPrecisionPicksTheTargetsLowDType) {
  using passes::PrecisionMode;
  const std::string act = "transformer.h.0.mlp.act", mean = "transformer.h.0.ln_1.mean";
  auto b = dtypesAfter(jobOn("ascend910b", PrecisionMode::ForceLowerPrecision));
  EXPECT_EQ(b.at(act), DType::BF16);
  EXPECT_EQ(b.at(mean), DType::BF16);
  auto a = dtypesAfter(jobOn("ascend910", PrecisionMode::ForceLowerPrecision));
  EXPECT_EQ(a.at(act), DType::F16) << "ascend910 has no bf16";
  JobSettings cli;
  cli.precision_mode = PrecisionMode::ForceLowerPrecision;
  cli.dtype = DType::F16;
  auto f16_model = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_TRUE(f16_model) << f16_model.message();
  EXPECT_EQ(dtypesAfter(*f16_model).at(act), DType::F16) << "an f16 op keeps f16";
}

TEST(PrecisionMode, CannSpellings) {
  using passes::PrecisionMode;
  EXPECT_EQ(passes::parsePrecisionMode("force_lowerprecision"), PrecisionMode::ForceLowerPrecision);
  EXPECT_EQ(passes::precisionModeName(PrecisionMode::ForceLowerPrecision), "force_lowerprecision");
  EXPECT_EQ(passes::parsePrecisionModeV2("fp16"), PrecisionMode::ForceFp16);
  EXPECT_EQ(passes::parsePrecisionModeV2("origin"), PrecisionMode::MustKeepOriginDType);
  EXPECT_EQ(passes::parsePrecisionModeV2("cube_fp16in_fp32out"), PrecisionMode::ForceFp32);
  EXPECT_EQ(passes::parsePrecisionModeV2("mixed_float16"), PrecisionMode::AllowMixPrecisionFp16);
  EXPECT_EQ(passes::parsePrecisionModeV2("mixed_bfloat16"), PrecisionMode::AllowMixPrecisionBf16);
  EXPECT_EQ(passes::parsePrecisionModeV2("mixed_bf16"), PrecisionMode::AllowMixPrecisionBf16);
  EXPECT_EQ(passes::parsePrecisionModeV2("force_fp16"), std::nullopt) << "a v1 value";
  EXPECT_EQ(passes::parsePrecisionMode("mixed_float16"), std::nullopt) << "a v2 value";
}

TEST(PrecisionMode, Bf16NeedsATargetWithBf16) {
  JobSettings cli;
  cli.target = "ascend910";
  cli.precision_mode = passes::PrecisionMode::AllowMixPrecisionBf16;
  auto job = resolveJob(std::nullopt, cli, DType::F16);
  ASSERT_FALSE(job);
  EXPECT_NE(job.message().find("allow_mix_precision_bf16 needs bf16"), std::string::npos)
      << job.message();
}

} // namespace
} // namespace kiln::driver
