// What `kiln init` writes, without the CLI: a Hugging Face config's weights
// as the family initialises them, scaled where a glob matches (and an error
// where none does), and the bytes a graph's parameters take.
#include "compiler/frontend/initial_weights.h"

#include <gtest/gtest.h>

#include "compiler/frontend/decoder_init.h"

namespace kiln::frontend {
namespace {

const std::string kTiny = KILN_SOURCE_DIR "/examples/qwen-tiny/config.json";

LoadedModel tiny() {
  ModelOptions options;
  options.seq = 2;
  auto model = loadModel(kTiny, options);
  EXPECT_TRUE(model.isOk()) << model.message();
  return std::move(model).value();
}

TEST(InitialWeights, ADecodersAreItsFamilysScaledWhereTheGlobMatches) {
  const LoadedModel model = tiny();
  const std::map<std::string, Tensor> plain = initDecoderWeights(*model.config, 7);
  auto same = initialWeights(model, kTiny, 7, 0.02, {});
  ASSERT_TRUE(same.isOk()) << same.message();
  ASSERT_EQ(same->size(), plain.size());
  for (const auto &[name, t] : plain)
    EXPECT_TRUE(same->at(name) == t) << name;

  const std::string scaled_name = "transformer.h.0.attn.c_attn.weight";
  ASSERT_TRUE(plain.count(scaled_name));
  auto scaled = initialWeights(model, kTiny, 7, 0.02, {{"transformer.h.*.attn.c_attn.weight", 4}});
  ASSERT_TRUE(scaled.isOk()) << scaled.message();
  const Tensor &before = plain.at(scaled_name), &after = scaled->at(scaled_name);
  for (int64_t i = 0; i < before.numElements(); i += 97)
    EXPECT_FLOAT_EQ(after.getFloat(i), 4 * before.getFloat(i)) << i;
  EXPECT_TRUE(scaled->at("transformer.wte.weight") == plain.at("transformer.wte.weight"))
      << "not matched, not scaled";
  EXPECT_FALSE(initialWeights(model, kTiny, 7, 0.02, {{"no.such.*", 2}}).isOk());
}

TEST(InitialWeights, AGraphsParametersTakeTheirTypesBytes) {
  const LoadedModel model = tiny();
  int64_t bytes = 0;
  for (const GraphInput &in : model.graph.inputs())
    if (in.role == InputRole::Parameter)
      bytes += model.graph.type(in.value).numElements() *
               static_cast<int64_t>(dtypeSize(model.graph.type(in.value).dtype));
  EXPECT_GT(bytes, 0);
  EXPECT_EQ(parameterBytes(model.graph), bytes);
}

} // namespace
} // namespace kiln::frontend
