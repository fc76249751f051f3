// Time to build the Qwen-14B training-step graph (forward, loss, backward,
// AdamW) at seq 2048, for 10, 20 and 40 layers: it should grow linearly.
#include <benchmark/benchmark.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"

namespace {

kiln::frontend::DecoderConfig qwen14b(int64_t layers) {
  auto config = kiln::frontend::readDecoderConfig(KILN_SOURCE_DIR "/examples/qwen-14b/config.json");
  if (!config) {
    fprintf(stderr, "%s\n", config.message().c_str());
    abort();
  }
  config->num_hidden_layers = layers;
  return *config;
}

void BM_Qwen14bTrainingGraph(benchmark::State &state) {
  const kiln::frontend::DecoderConfig config = qwen14b(state.range(0));
  kiln::frontend::ModelOptions options;
  options.seq = 2048;
  size_t nodes = 0;
  for (auto _ : state) {
    auto forward = kiln::frontend::buildDecoderForward(config, options);
    auto train = kiln::autodiff::buildTrainingStep(*forward, {});
    nodes = train->numNodes();
    benchmark::DoNotOptimize(nodes);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["layers"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_Qwen14bTrainingGraph)->Arg(10)->Arg(20)->Arg(40)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
