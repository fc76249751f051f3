// Compiling a training job for N devices: the model's forward graph becomes
// the per-replica step (forward, backward, loss scaled) and the AdamW
// update(s), each run through the job's passes and compiled into kernels.
#pragma once

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/parallel/training_program.h"

namespace kiln::driver {

// `model.batch` is the global batch; each of the `parallel.dp` replicas
// compiles for its share, as one rank's shard when `parallel.tp` > 1. Without ZeRO one update
// serves every replica; with ZeRO-1 each replica gets the update of the parameters it owns.
// With `evaluation`, also the step's forward alone for the same micro-batch
// (program.eval), for validation on held-out data.
Expected<parallel::TrainingProgram> compileTrainingProgram(const ModelRequest &model,
                                                           const ResolvedJob &job,
                                                           const KernelSettings &settings,
                                                           const parallel::ParallelConfig &config,
                                                           bool evaluation = false);

// The model's forward for `config`'s layout (its tensor-parallel shard,
// pipeline stages and ZeRO-3 slices, as the step has them), `micro_batch`
// sequences of `model.seq` tokens a run, through the job's passes: what
// evaluation runs (parallel::EvalProgram). With one device it is the whole
// forward graph, what kiln eval runs. `cache` may be null (the one
// `settings` ask for is opened).
Expected<parallel::EvalProgram> compileEvalProgram(const ModelRequest &model,
                                                   const ResolvedJob &job,
                                                   const KernelSettings &settings,
                                                   const parallel::ParallelConfig &config,
                                                   int64_t micro_batch, cache::KernelCache *cache);

// The two halves of compileTrainingProgram, for callers that plan many
// layouts sharing a step (kiln plan): the step for `config`'s tensor
// parallelism and micro-batch, with the parameter tables and signature; then
// for `program.parallel`'s replicas and ZeRO stage the slices, the updates
// and the memory estimate (replacing any it had). `cache` may be null.
Expected<parallel::TrainingProgram> compileTrainingStep(const ModelRequest &model,
                                                        const ResolvedJob &job,
                                                        const KernelSettings &settings,
                                                        const parallel::ParallelConfig &config,
                                                        cache::KernelCache *cache);
Status addTrainingUpdates(parallel::TrainingProgram &program, const ResolvedJob &job,
                          const KernelSettings &settings, cache::KernelCache *cache);

} // namespace kiln::driver
