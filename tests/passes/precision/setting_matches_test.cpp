// The job's list-like precision settings checked against the tiny Qwen
// training step: what each entry matched, and typos (a node or a layer the
// model lacks) as errors naming the file or flag with the nearest names.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/precision/setting_matches.h"
#include "tests/support/pass_test_util.h"

namespace kiln::passes {
namespace {

PrecisionSettings withKeep(std::string_view text) {
  PrecisionSettings s;
  auto keep = parseKeepDType(text, "keep.txt");
  EXPECT_TRUE(keep) << keep.message();
  s.keep_dtype = std::move(*keep);
  return s;
}

TEST(SettingMatches, LayerOfANodeName) {
  EXPECT_EQ(modelLayerOf("transformer.h.12.attn.softmax"), 12);
  EXPECT_EQ(modelLayerOf("grad.transformer.h.3.mlp.w1"), 3);
  EXPECT_EQ(modelLayerOf("transformer.h.7"), 7);
  EXPECT_EQ(modelLayerOf("transformer.ln_f"), -1);
  EXPECT_EQ(modelLayerOf("transformer.h.x.attn"), -1);
  EXPECT_EQ(modelLayerOf("transformer.h.1x.attn"), -1);
}

TEST(SettingMatches, KeepDTypeEntriesReportWhatTheyMatched) {
  const Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  auto m = matchPrecisionSettings(
      graph, withKeep("transformer.h.0.attn.scores\nOpType::SoftmaxV2\nOpType::Sigmoid\n"));
  ASSERT_TRUE(m) << m.message();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].setting, "keep_dtype");
  EXPECT_EQ((*m)[0].source, "keep.txt");
  EXPECT_EQ((*m)[0].nodes, 1);
  EXPECT_EQ((*m)[1].entry, "OpType::SoftmaxV2");
  EXPECT_EQ((*m)[1].op_types, std::vector<std::string>{"Softmax"});
  EXPECT_EQ((*m)[1].nodes, kiln::testing::tinyQwenLayers()) << "one softmax a layer";
  EXPECT_EQ((*m)[2].nodes, 0) << "an op type the graph lacks is reported, not refused";
}

TEST(SettingMatches, AKeepDTypeNameNoNodeHasIsAnError) {
  const Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  auto m = matchPrecisionSettings(graph, withKeep("# keep\ntransformer.h.0.attn.scores\n"
                                                  "transformer.h.0.attn.softmx\n"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("keep.txt: line 3: no node named 'transformer.h.0.attn.softmx'"),
            std::string::npos)
      << m.message();
  EXPECT_NE(m.message().find("did you mean transformer.h.0.attn.softmax"), std::string::npos)
      << m.message();
}

TEST(SettingMatches, AttentionLayersTheModelLacksAreAnError) {
  const Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  PrecisionSettings s;
  auto ok = matchPrecisionSettings(graph, s, {1}, "--attention-fp32-layers");
  ASSERT_TRUE(ok) << ok.message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].entry, "1");
  EXPECT_EQ((*ok)[0].nodes, 1) << "layer 1's softmax";

  auto bad = matchPrecisionSettings(graph, s, {1, 5}, "--attention-fp32-layers");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("--attention-fp32-layers: layer 5 is not in graph"),
            std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("its layers: 0, 1; did you mean 1?"), std::string::npos)
      << bad.message();
}

TEST(SettingMatches, MixlistEditsReportTheNodesOfTheirOpTypes) {
  const Graph graph = kiln::testing::tinyTrainingStep(DType::F16).graph;
  PrecisionSettings s;
  ASSERT_TRUE(s.mixlist.applyEdits(
      nlohmann::json::parse(R"({"white-list": {"to-remove": ["MatMulV2"]}})"), "mix.json"));
  auto m = matchPrecisionSettings(graph, s);
  ASSERT_TRUE(m) << m.message();
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].setting, "modify_mixlist");
  EXPECT_EQ((*m)[0].source, "mix.json");
  EXPECT_EQ((*m)[0].entry, "white-list to-remove MatMulV2");
  EXPECT_GT((*m)[0].nodes, 0);
}

} // namespace
} // namespace kiln::passes
