#include "compiler/driver/training.h"

#include <spdlog/spdlog.h>

#include "compiler/autodiff/training_step.h"
#include "compiler/frontend/model_loader.h"
#include "compiler/parallel/weight_copies.h"
#include "compiler/parallel/zero_shard.h"
#include "ir/tensor_split.h"
#include "passes/fusion/flash_attention_fusion.h"
#include "passes/pass_manager.h"
#include "passes/precision/setting_matches.h"

namespace kiln::driver {
namespace {

// `check_settings` false for a pipeline stage, which lacks the other
// stages' layers (the whole step was checked); `after_precision` as
// compileGraph takes it.
Expected<parallel::CompiledGraph> compiled(Graph graph, const ResolvedJob &job,
                                           const KernelSettings &settings,
                                           cache::KernelCache *cache, bool check_settings = true,
                                           const GraphRewrite &after_precision = {}) {
  KILN_RETURN_IF_ERROR(compileGraph(graph, job, {}, check_settings, after_precision).status());
  KILN_ASSIGN_OR_RETURN(JobKernels kernels,
                        compileJobKernels(graph, job, settings, nullptr, cache));
  if (!kernels.kernels.fallbacks.empty())
    spdlog::warn("{}", codegen::fallbackSummary(kernels.kernels.fallbacks));
  return parallel::CompiledGraph{std::move(graph), std::move(kernels.kernels)};
}

// The step outputs its gradients (the runtime sums them over the replicas)
// and takes its loss scale; the update is compiled apart, in buckets.
autodiff::TrainingStepOptions stepOptions() {
  autodiff::TrainingStepOptions options;
  options.optimizer = false;
  options.output_gradients = true;
  options.loss_scale_input = true;
  options.grad_norm = false;
  return options;
}

// Recomputation applied to the whole step before it is cut into pipeline
// stages: its copies are backward nodes that read each layer's input, so
// that input is all a stage keeps for its backward. Each stage's programs
// hold either the originals or the copies, so no cleanup pass can merge
// them back; RecomputePass finds nothing more to do in them. The step
// rewrites run through the pass manager (their group alone), as in the
// stages' own pipelines.
Status recomputeFirst(Graph &step, const ResolvedJob &job) {
  const passes::PassManager manager(*job.registry, *job.context);
  return manager.run(step, passes::PassGroup::StepRewrite).status();
}

// What a step program's compile does after the precision passes: with
// weight copies, its Casts of trained weights read the copies instead
// (parallel/weight_copies.h), each weight's copy dtype gathered into
// `copies` over the programs. Without ZeRO only: with it the update writes a
// slice of the weight, and the copy would need gathering too. And in INFNAN
// mode only: saturation mode raises the float status where a Cast clamps,
// which the step reports and the update does not.
GraphRewrite weightCopies(const parallel::TrainingProgram &program, const ResolvedJob &job,
                          std::map<std::string, DType> &copies) {
  if (!program.parallel.weight_copies || program.parallel.zero != 0 ||
      job.overflow != OverflowMode::InfNan)
    return {};
  std::set<std::string> trained;
  for (const parallel::Parameter &p : program.params)
    trained.insert(p.name);
  return [trained, &copies](Graph &graph) -> Status {
    for (const auto &[name, dtype] : parallel::readWeightCopies(graph, trained))
      if (!copies.emplace(name, dtype).second && copies.at(name) != dtype)
        return Error("weight '" + name + "': its step programs read it in two dtypes");
    return Status::ok();
  };
}

// `graph` cut into the layout's model stages (pp x virtual_stages), the
// layers split as it says.
Expected<parallel::PipelinePartition> cutPipeline(const Graph &graph,
                                                  const parallel::ParallelConfig &config) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> split,
                        parallel::layerStages(config, parallel::transformerLayers(graph)));
  return parallel::partitionPipeline(graph, config.modelStages(), std::move(split));
}

// The step cut into its model stages, each program compiled; a parameter
// lives on the devices of its model stage's pipeline rank.
Status compilePipelineStages(parallel::TrainingProgram &program, Graph step, const ResolvedJob &job,
                             const KernelSettings &settings, cache::KernelCache *cache,
                             const GraphRewrite &after_precision) {
  KILN_RETURN_IF_ERROR(passes::matchPrecisionSettings(step, *job.context).status());
  KILN_RETURN_IF_ERROR(recomputeFirst(step, job));
  KILN_ASSIGN_OR_RETURN(parallel::PipelinePartition cut, cutPipeline(step, program.parallel));
  for (int s = 0; s < cut.stages; ++s) {
    parallel::PipelineStage stage;
    KILN_ASSIGN_OR_RETURN(stage.forward, compiled(std::move(cut.forward[s]), job, settings, cache,
                                                  false, after_precision));
    KILN_ASSIGN_OR_RETURN(stage.backward, compiled(std::move(cut.backward[s]), job, settings, cache,
                                                   false, after_precision));
    program.stages.push_back(std::move(stage));
  }
  program.transfers = std::move(cut.transfers);
  for (std::vector<parallel::Parameter> *table : {&program.params, &program.frozen})
    for (parallel::Parameter &p : *table) {
      p.model_stage = parallel::weightStage(p.name, cut.layer_stage, cut.stages);
      p.stage = program.parallel.pipelineRank(p.model_stage);
    }
  return Status::ok();
}

} // namespace

Expected<parallel::TrainingProgram> compileTrainingStep(const ModelRequest &model,
                                                        const ResolvedJob &job,
                                                        const KernelSettings &settings,
                                                        const parallel::ParallelConfig &config,
                                                        cache::KernelCache *cache) {
  parallel::TrainingProgram program;
  program.parallel = config;
  program.batch_per_replica = model.batch / config.dp;
  program.micro_batch = program.batch_per_replica / config.grad_accum;
  frontend::ModelOptions options;
  options.batch = program.micro_batch;
  options.seq = model.seq;
  options.dtype = job.dtype;
  options.tensor_parallel = config.tp;
  options.sequence_parallel = config.sequenceParallel();
  options.lora = model.lora;
  options.ops = job.ops;
  KILN_ASSIGN_OR_RETURN(frontend::LoadedModel loaded, frontend::loadModel(model.model, options));
  program.seq = model.seq > 0 ? model.seq : loaded.config ? loaded.config->seq_length : 0;

  // Attention fuses before autodiff: its backward is then the fused op's.
  KILN_RETURN_IF_ERROR(passes::fuseAttentionBeforeAutodiff(loaded.graph, *job.context).status());
  KILN_ASSIGN_OR_RETURN(Graph step, autodiff::buildTrainingStep(loaded.graph, stepOptions()));
  for (const GraphInput &in : loaded.graph.inputs()) {
    if (!isWeight(in.role))
      continue;
    auto found = loaded.splits.find(in.name);
    const TensorSplit split = found == loaded.splits.end() ? TensorSplit{} : found->second;
    const bool trained = in.role == InputRole::Parameter;
    (trained ? program.params : program.frozen)
        .push_back({in.name, loaded.graph.type(in.value), split});
  }
  parallel::TrainingSignature &sig = program.signature;
  sig.loss_scale = autodiff::kLossScaleName;
  if (step.findInput(frontend::kLoraDropoutSeedName))
    sig.dropout_seed = frontend::kLoraDropoutSeedName;
  if (step.findInput(frontend::kTensorParallelRankName))
    sig.tensor_parallel_rank = frontend::kTensorParallelRankName;
  if (config.zero == 3) {
    // ZeRO-3: each trained weight a flat slice per replica, gathered before
    // use. Recomputation stays in the pipeline (after the cleanup passes,
    // which would merge its copies back into the forward).
    std::set<std::string> trained;
    for (const parallel::Parameter &p : program.params)
      trained.insert(p.name);
    KILN_ASSIGN_OR_RETURN(step, parallel::shardWeights(step, trained, config.dp));
  }
  std::map<std::string, DType> copies;
  const GraphRewrite copy_weights = weightCopies(program, job, copies);
  if (config.pp > 1) {
    KILN_RETURN_IF_ERROR(
        compilePipelineStages(program, std::move(step), job, settings, cache, copy_weights));
  } else {
    KILN_ASSIGN_OR_RETURN(program.step,
                          compiled(std::move(step), job, settings, cache, true, copy_weights));
  }
  sig.learning_rate = autodiff::kLearningRateName;
  sig.grad_scale = autodiff::kGradScaleName;
  sig.adam_step = autodiff::kAdamStepName;
  for (parallel::Parameter &p : program.params) {
    sig.gradient.push_back(autodiff::gradientName(p.name));
    sig.moment.push_back(autodiff::adamMomentName(p.name));
    sig.velocity.push_back(autodiff::adamVelocityName(p.name));
    auto copy = copies.find(p.name);
    sig.weight_copy.push_back(copy == copies.end() ? "" : autodiff::weightCopyName(p.name));
    if (copy != copies.end())
      p.copy_dtype = copy->second;
  }
  return program;
}

Status addTrainingUpdates(parallel::TrainingProgram &program, const ResolvedJob &job,
                          const KernelSettings &settings, cache::KernelCache *cache) {
  const parallel::ParallelConfig &config = program.parallel;
  program.optimizers.clear();
  program.bucket_params.clear();
  program.bucket_stage.clear();
  // ZeRO gives every replica an equal flat slice of each parameter's
  // optimizer state (and with ZeRO-3 of the weight itself, which the step
  // was compiled for): the update runs on slices, one set of programs for
  // every replica.
  for (parallel::Parameter &p : program.params) {
    p.slice = config.zero >= 1 ? flatSliceElements(numElements(p.type.shape), config.dp) : 0;
    p.weight_sliced = config.zero == 3;
  }
  std::vector<int64_t> sizes;
  for (const parallel::Parameter &p : program.params)
    sizes.push_back(numElements(p.sliceType().shape) *
                    static_cast<int64_t>(dtypeSize(p.type.dtype)));
  // The buckets stage by stage: each bucket's parameters live on one
  // stage's devices.
  for (int s = 0; s < config.pp; ++s) {
    std::vector<size_t> staged;
    for (size_t i = 0; i < program.params.size(); ++i)
      if (program.params[i].stage == s)
        staged.push_back(i);
    for (std::vector<size_t> &bucket : parallel::updateBuckets(sizes, staged)) {
      std::vector<std::pair<std::string, TensorType>> params;
      std::map<std::string, DType> copies;
      for (size_t i : bucket) {
        const parallel::Parameter &p = program.params[i];
        params.emplace_back(p.name, p.sliceType());
        if (p.copy_dtype)
          copies.emplace(p.name, *p.copy_dtype);
      }
      KILN_ASSIGN_OR_RETURN(Graph update,
                            autodiff::buildOptimizerStep(params, stepOptions(), copies));
      KILN_ASSIGN_OR_RETURN(parallel::CompiledGraph c,
                            compiled(std::move(update), job, settings, cache));
      program.optimizers.push_back(std::move(c));
      program.bucket_params.push_back(std::move(bucket));
      program.bucket_stage.push_back(s);
    }
  }
  program.memory = parallel::estimateDeviceMemory(program);
  return Status::ok();
}

Expected<parallel::EvalProgram> compileEvalProgram(const ModelRequest &model,
                                                   const ResolvedJob &job,
                                                   const KernelSettings &settings,
                                                   const parallel::ParallelConfig &config,
                                                   int64_t micro_batch, cache::KernelCache *cache) {
  frontend::ModelOptions options;
  options.batch = micro_batch;
  options.seq = model.seq;
  options.dtype = job.dtype;
  options.tensor_parallel = config.tp;
  options.sequence_parallel = config.sequenceParallel();
  options.lora = model.lora;
  options.lora.dropout = 0; // evaluation: PEFT's eval mode
  options.ops = job.ops;
  KILN_ASSIGN_OR_RETURN(frontend::LoadedModel loaded, frontend::loadModel(model.model, options));
  Graph forward = std::move(loaded.graph);
  forward.setName(forward.name() + "_eval");
  KILN_RETURN_IF_ERROR(passes::fuseAttentionBeforeAutodiff(forward, *job.context).status());
  // The loss alone: the logits' buffer is the arena's to reuse.
  std::erase_if(forward.mutableOutputs(),
                [](const GraphOutput &out) { return out.name != "loss"; });
  if (!forward.findOutput("loss"))
    return Error("graph '" + forward.name() + "' has no output named 'loss' to evaluate");
  if (config.zero == 3) {
    // The weights as the step keeps them: each replica's slice, gathered before use.
    std::set<std::string> trained;
    for (const GraphInput &in : forward.inputs())
      if (in.role == InputRole::Parameter)
        trained.insert(in.name);
    KILN_ASSIGN_OR_RETURN(forward, parallel::shardWeights(forward, trained, config.dp));
  }
  parallel::EvalProgram program;
  program.micro_batch = micro_batch;
  program.seq = model.seq > 0 ? model.seq : loaded.config ? loaded.config->seq_length : 0;
  if (config.pp == 1) {
    KILN_ASSIGN_OR_RETURN(parallel::CompiledGraph whole,
                          compiled(std::move(forward), job, settings, cache));
    program.stages.push_back(std::move(whole));
    return program;
  }
  // The step's cut of the layers (a forward has no backward to place).
  KILN_RETURN_IF_ERROR(passes::matchPrecisionSettings(forward, *job.context).status());
  KILN_ASSIGN_OR_RETURN(parallel::PipelinePartition cut, cutPipeline(forward, config));
  for (int s = 0; s < cut.stages; ++s) {
    KILN_ASSIGN_OR_RETURN(parallel::CompiledGraph stage,
                          compiled(std::move(cut.forward[s]), job, settings, cache, false));
    program.stages.push_back(std::move(stage));
  }
  program.transfers = std::move(cut.transfers);
  return program;
}

Expected<parallel::TrainingProgram> compileTrainingProgram(const ModelRequest &model,
                                                           const ResolvedJob &job,
                                                           const KernelSettings &settings,
                                                           const parallel::ParallelConfig &config,
                                                           bool evaluation) {
  // One cache for the step and every update bucket: opened, and its
  // counters written, once.
  std::string cache_dir;
  std::unique_ptr<cache::KernelCache> cache = openKernelCache(settings, cache_dir);
  KILN_ASSIGN_OR_RETURN(parallel::TrainingProgram program,
                        compileTrainingStep(model, job, settings, config, cache.get()));
  KILN_RETURN_IF_ERROR(addTrainingUpdates(program, job, settings, cache.get()));
  if (evaluation) {
    KILN_ASSIGN_OR_RETURN(program.eval, compileEvalProgram(model, job, settings, config,
                                                           program.micro_batch, cache.get()));
  }
  return program;
}

} // namespace kiln::driver
