// Time of the whole pass pipeline (cleanup, precision, graph fusion, UB
// fusion, fusion rules) on the Qwen-14B training-step graph at seq 2048 for
// ascend910b, for 10, 20 and 40 layers: it should grow linearly. Graph
// building is outside the timed region.
#include <benchmark/benchmark.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"

namespace {

template <typename T> T orDie(kiln::Expected<T> value) {
  if (!value) {
    fprintf(stderr, "%s\n", value.message().c_str());
    abort();
  }
  return std::move(*value);
}

// range(0): layers; range(1): 0 = the f16 model as it is, 1 = an f32 model
// under allow_mix_precision (the precision passes do real work).
void BM_Qwen14bPassPipeline(benchmark::State &state) {
  const bool mixed = state.range(1) == 1;
  auto config =
      orDie(kiln::frontend::readDecoderConfig(KILN_SOURCE_DIR "/examples/qwen-14b/config.json"));
  config.num_hidden_layers = state.range(0);
  kiln::frontend::ModelOptions options;
  options.seq = 2048;
  options.dtype = mixed ? kiln::DType::F32 : kiln::DType::F16;
  const kiln::Graph train = orDie(kiln::autodiff::buildTrainingStep(
      orDie(kiln::frontend::buildDecoderForward(config, options)), {}));
  kiln::driver::JobSettings settings;
  if (mixed)
    settings.precision_mode = kiln::passes::PrecisionMode::AllowMixPrecisionFp16;
  const kiln::driver::ResolvedJob job =
      orDie(kiln::driver::resolveJob(std::nullopt, settings, kiln::DType::F16));
  size_t groups = 0, nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    kiln::Graph graph = train;
    state.ResumeTiming();
    orDie(kiln::driver::compileGraph(graph, job));
    groups = graph.groups().size();
    nodes = graph.numNodes();
  }
  state.counters["layers"] = static_cast<double>(state.range(0));
  state.counters["nodes_before"] = static_cast<double>(train.numNodes());
  state.counters["nodes_after"] = static_cast<double>(nodes);
  state.counters["groups"] = static_cast<double>(groups);
}
BENCHMARK(BM_Qwen14bPassPipeline)
    ->ArgsProduct({{10, 20, 40}, {0, 1}})
    ->ArgNames({"layers", "mixed"})
    ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
