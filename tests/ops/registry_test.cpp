#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "ops/op_docs.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// Every XML definition has an implementation and every implementation a definition.
TEST(OpRegistry, DefinitionsAndImplementationsMatch) {
  const OpRegistry &r = OpRegistry::builtin();
  for (const std::string &e : r.consistencyErrors())
    ADD_FAILURE() << e;
  EXPECT_FALSE(r.names().empty());
}

TEST(OpDefs, ParseErrorsNameTheLine) {
  auto defs = parseOpDefs("<ops>\n<op name=\"X\" kind=\"weird\"><output name=\"y\"/></op></ops>",
                          "test.xml");
  ASSERT_FALSE(defs);
  EXPECT_NE(defs.message().find("test.xml:2"), std::string::npos) << defs.message();
}

TEST(OpDefs, AttributeDefaultsAreTyped) {
  auto defs = parseOpDefs(R"(<ops><op name="X" kind="elementwise"><input name="x"/>
      <output name="y"/><attr name="n" type="int" default="abc"/></op></ops>)",
                          "bad.xml");
  ASSERT_FALSE(defs);
  EXPECT_NE(defs.message().find("default 'abc'"), std::string::npos) << defs.message();
}

// docs/ops.md is generated from the definitions; regenerate it with
// `kiln ops --format markdown > docs/ops.md` when an op changes.
TEST(OpDocs, DocsOpsMdIsUpToDate) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/ops.md");
  std::stringstream file;
  file << in.rdbuf();
  EXPECT_EQ(file.str(), opsToMarkdown(OpRegistry::builtin()))
      << "docs/ops.md is stale: run kiln ops --format markdown > docs/ops.md";
}

// Every op is differentiable except those whose definition says why not.
TEST(OpRegistry, EveryFloatOpHasAGradientUnlessItIsAGradientItself) {
  // The vocab-parallel statistics (and the max over the ranks) feed only the
  // loss, whose gradient rule covers them; ShardIndex maps integers.
  const std::set<std::string> not_differentiable = {"AdamW",
                                                    "CrossEntropyLossGrad",
                                                    "DataParallelGather", // placed after autodiff
                                                    "EmbeddingGrad",
                                                    "FlashAttentionScoreGrad",
                                                    "GatherElementsGrad",
                                                    "RsqrtGrad",
                                                    "SiluGrad",
                                                    "SoftmaxGrad",
                                                    "ShardIndex",
                                                    "TensorParallelMax",
                                                    "VocabParallelMax",
                                                    "VocabParallelSumExp",
                                                    "VocabParallelCrossEntropyGrad"};
  for (const std::string &name : OpRegistry::builtin().names()) {
    if (OpRegistry::builtin().find(name)->def.inputs.empty())
      continue; // generators: nothing to differentiate
    EXPECT_EQ(static_cast<bool>(OpRegistry::builtin().find(name)->impl.grad),
              !not_differentiable.count(name))
        << name;
  }
}

} // namespace
} // namespace kiln::ops
