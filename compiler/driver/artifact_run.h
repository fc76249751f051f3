// Running an artifact from safetensors weights and inputs, what
// `kiln run job.kiln` does: pick the bucket of the inputs' seq, load its
// kernels (artifact_loader.h) and bind the graph's inputs. The executor that
// runs them lives in runtime/.
#pragma once

#include <optional>
#include <string>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_loader.h"
#include "ops/interpreter.h"
#include "support/error.h"

namespace kiln::driver {

struct ArtifactRunRequest {
  std::string weights_path; // safetensors with the parameters by their HF names
  // safetensors with input_ids (i64 [B,S]), optional labels and, for a
  // training artifact, the optimizer state ("lr", "adam.step", "adam.m.<param>", "adam.v.<param>")
  std::string inputs_path;
  bool training = false; // must be what the artifact was compiled with
};

struct PreparedArtifactRun {
  artifact::LoadedBucket bucket;
  ops::TensorMap inputs;
  OverflowMode overflow = OverflowMode::InfNan;
};

Expected<PreparedArtifactRun> prepareArtifactRun(const artifact::Artifact &artifact,
                                                 const ArtifactRunRequest &request);

// What `kiln make-inputs job.kiln` writes: every input a run of the bucket
// of `seq` (0: the first bucket) needs besides the weights. `input_ids` (i64
// [batch, seq], uniform below the vocabulary of the embedding it feeds) for a
// decoder, normal(0, 1) data inputs for a graph JSON's; and for a training
// artifact the state of a first AdamW step: `lr` (f32[]), `adam.step` 0 and
// zero moments `adam.m.<param>` / `adam.v.<param>` shaped as their
// parameters; any other hyperparameter a scale of 1 (float) or 0 (integer).
// The outputs of a training run hold the same names, ready to feed the next.
struct ArtifactInputsRequest {
  int64_t seq = 0;
  uint64_t seed = 0;
  double lr = 3e-4; // kiln train's default
  // When given, whether the inputs are for a whole training step: an error
  // naming the flag when the artifact was compiled as the other kind.
  std::optional<bool> training;
};
Expected<ops::TensorMap> makeArtifactInputs(const artifact::Artifact &artifact,
                                            const ArtifactInputsRequest &request);

// What a run writes: a forward artifact's "logits" and "loss" in f32 (as
// kiln run MODEL writes them); a training artifact's every output as the step
// made it ("loss", "grad_norm", and the updated parameters and optimizer
// state under their input names, ready to feed the next step).
ops::TensorMap selectArtifactOutputs(const artifact::Artifact &artifact, ops::TensorMap outputs);

} // namespace kiln::driver
