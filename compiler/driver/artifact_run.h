// Running an artifact from safetensors weights and inputs, what
// `kiln run job.kiln` does: pick the bucket of the inputs' seq, load its
// kernels (artifact_loader.h) and bind the graph's inputs. The executor that
// runs them lives in runtime/.
#pragma once

#include <string>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_loader.h"
#include "ir/error.h"
#include "ops/interpreter.h"

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

// What a run writes: a forward artifact's "logits" and "loss" in f32 (as
// kiln run MODEL writes them); a training artifact's every output as the step
// made it ("loss", "grad_norm", and the updated parameters and optimizer
// state under their input names, ready to feed the next step).
ops::TensorMap selectArtifactOutputs(const artifact::Artifact &artifact, ops::TensorMap outputs);

} // namespace kiln::driver
