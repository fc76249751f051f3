// The per-device memory of a training layout: the literature's formula for
// it, and the plan's breakdown of its peak, whose parts add up to the peak.
#include "compiler/parallel/memory_formula.h"

#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compiler/driver/training.h"
#include "compiler/frontend/decoder_model.h"

namespace kiln::parallel {
namespace {

frontend::DecoderConfig configOf(const std::string &name) {
  auto config = frontend::readDecoderConfig(std::string(KILN_SOURCE_DIR) + "/examples/" + name +
                                            "/config.json");
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : frontend::DecoderConfig{};
}

ParallelConfig layout(int dp, int tp, int zero) {
  ParallelConfig c;
  c.devices = dp * tp;
  c.dp = dp;
  c.tp = tp;
  c.zero = zero;
  return c;
}

TEST(MemoryFormula, Qwen14BAsZeroAndKorthikantiCountIt) {
  const frontend::DecoderConfig config = configOf("qwen-14b");
  const double psi = 14167290880.0;
  // Mixed-precision Adam: 16 bytes a parameter; ZeRO-1 over 8: 4 + 12 / 8.
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 8, 0), 1, 2048, DType::F16).model_states,
            static_cast<int64_t>(psi * 16 / 8));
  EXPECT_EQ(memoryFormula(config, {}, layout(8, 1, 1), 1, 2048, DType::F16).model_states,
            static_cast<int64_t>(psi * (4 + 12.0 / 8)));
  // ZeRO-2: the gradient sharded too, 2 + 14 / 8.
  EXPECT_EQ(memoryFormula(config, {}, layout(8, 1, 2), 1, 2048, DType::F16).model_states,
            static_cast<int64_t>(psi * (2 + 14.0 / 8)));
  // f32 training: 4 + 4 + 8, no master copy.
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 1, 0), 1, 2048, DType::F32).model_states,
            static_cast<int64_t>(psi * 16));
  // The paper's sbh(34 + 5as/h) a layer with kiln's 16 for its 10 (norms
  // in f32 keeping their normalised output, no dropout), 40 layers:
  // 2048 x 5120 x (40 + 80) x 40.
  EXPECT_EQ(memoryFormula(config, {}, layout(8, 1, 1), 1, 2048, DType::F16).activations,
            int64_t{2048} * 5120 * 120 * 40);
  // With t = 8: sbh(16 + 24/8 + 80/8).
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 8, 0), 1, 2048, DType::F16).activations,
            int64_t{2048} * 5120 * 29 * 40);
  // Selective recomputation: sbh(16 + 24/8); full: 2sbh, the layer's input.
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 8, 0), 1, 2048, DType::F16,
                          passes::RecomputeMode::Selective)
                .activations,
            int64_t{2048} * 5120 * 19 * 40);
  EXPECT_EQ(
      memoryFormula(config, {}, layout(1, 8, 0), 1, 2048, DType::F16, passes::RecomputeMode::Full)
          .activations,
      int64_t{2048} * 5120 * 2 * 40);
  // Sequence parallelism: sbh(40 + 5as/h)/t = sbh(40 + 80)/8 a layer, the
  // kept input of full recomputation 2sbh/8.
  ParallelConfig sp = layout(1, 8, 0);
  sp.sequence_parallel = true;
  EXPECT_EQ(memoryFormula(config, {}, sp, 1, 2048, DType::F16).activations,
            int64_t{2048} * 5120 * 120 / 8 * 40);
  EXPECT_EQ(
      memoryFormula(config, {}, sp, 1, 2048, DType::F16, passes::RecomputeMode::Full).activations,
      int64_t{2048} * 5120 * 2 / 8 * 40);
  // Fused attention: the 5as/(ht) term goes, the row statistics (8 bytes a
  // row of each of the 40/8 heads) stay.
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 8, 0), 1, 2048, DType::F16,
                          passes::RecomputeMode::None, true)
                .activations,
            int64_t{2048} * 5120 * 19 * 40 + int64_t{2048} * 8 * 5 * 40);
  // Interleaved 1F1B, P = 4, V = 2, M = 8: device 0 holds 2(P - 1) +
  // (V - 1)P + 1 = 11 model stages' micro-batches of 40/8 layers, 55 layers'
  // worth, L(1 + 3/8); with M = P it runs every forward first, 8 of them: L.
  ParallelConfig pipeline = layout(1, 2, 0);
  pipeline.pp = 4;
  pipeline.devices = 8;
  pipeline.grad_accum = 8;
  const int64_t plain = memoryFormula(config, {}, pipeline, 1, 2048, DType::F16).activations;
  pipeline.virtual_stages = 2;
  EXPECT_EQ(memoryFormula(config, {}, pipeline, 1, 2048, DType::F16).activations,
            static_cast<int64_t>(static_cast<double>(plain) * 55 / 40));
  pipeline.grad_accum = 4;
  EXPECT_EQ(memoryFormula(config, {}, pipeline, 1, 2048, DType::F16).activations, plain);
  // LoRA: the base at 2 bytes, the adapters at 16, both split 8 ways.
  frontend::LoraConfig lora;
  lora.rank = 64;
  auto adapters = frontend::loraParameters(config, lora);
  ASSERT_TRUE(adapters.isOk());
  double a = 0;
  for (const frontend::ParamSpec &p : *adapters)
    a += static_cast<double>(numElements(p.shape));
  EXPECT_EQ(a, 223150080.0); // r 64 on c_attn, c_proj, w1, w2 of 40 layers
  EXPECT_EQ(memoryFormula(config, lora, layout(1, 8, 0), 1, 2048, DType::F16).model_states,
            static_cast<int64_t>((psi * 2 + a * 16) / 8));
}

// The breakdown's parts add up to the planned peak, whichever phase sets it.
// Llama-3.1-8B (32 query heads, 8 key/value heads of 128) over 16 ranks:
// each rank holds one whole key/value head, replicated over the two ranks
// that use it, where an even split would give it half of one: 64 more rows
// of 4096 in each of k_proj and v_proj, in each of the 32 layers. K and V's
// activations are one head's of 32: 24/t becomes 20/16 + 4/32.
TEST(MemoryFormula, ReplicatedKeyValueHeadsCountOnEveryRankThatHoldsThem) {
  const frontend::DecoderConfig config = configOf("llama-3.1-8b");
  const double per_rank = 8030261248.0 / 16 + 32.0 * 2 * 64 * 4096;
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 16, 0), 1, 2048, DType::F16).model_states,
            static_cast<int64_t>(per_rank * 16));
  EXPECT_EQ(memoryFormula(config, {}, layout(1, 16, 0), 1, 2048, DType::F16,
                          passes::RecomputeMode::Selective)
                .activations,
            static_cast<int64_t>(2048.0 * 4096 * (16 + 20.0 / 16 + 4.0 / 32) * 32));
}

TEST(MemoryBreakdown, PartsAddUpToThePeak) {
  const std::string tiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";
  driver::JobSettings flags;
  flags.source = "test";
  auto job = driver::resolveJob(std::nullopt, flags, DType::F32);
  ASSERT_TRUE(job) << job.message();
  driver::KernelSettings kernels;
  kernels.dir =
      (std::filesystem::temp_directory_path() / ("kiln-breakdown-" + std::to_string(::getpid())))
          .string();
  struct Case {
    int64_t batch, seq;
    int dp, tp, zero;
    bool lora, update;
  };
  // Two tokens a step: the update sets the peak; 8 x 32: the step does.
  for (const Case &c : {Case{2, 2, 1, 1, 0, false, true}, Case{8, 32, 2, 1, 1, false, false},
                        Case{8, 32, 1, 2, 0, true, false}, Case{2, 2, 2, 1, 2, false, true}}) {
    driver::ModelRequest model{tiny, true, c.batch, c.seq};
    if (c.lora)
      model.lora.rank = 4;
    auto program = driver::compileTrainingProgram(model, *job, kernels, layout(c.dp, c.tp, c.zero));
    ASSERT_TRUE(program.isOk()) << program.message();
    const DeviceMemoryEstimate &m = program->memory;
    SCOPED_TRACE(m.toText() + "; " + m.breakdown.toText());
    EXPECT_EQ(m.breakdown.update, c.update);
    EXPECT_EQ(m.breakdown.total(), m.peak);
    EXPECT_GT(m.breakdown.weights, 0);
    EXPECT_EQ(m.breakdown.frozen_weights > 0, c.lora);
    if (!c.update) {
      EXPECT_GT(m.breakdown.activations, 0);
    }
  }
  std::filesystem::remove_all(*kernels.dir);
}

} // namespace
} // namespace kiln::parallel
