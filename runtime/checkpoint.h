// Training checkpoints: one safetensors file per saved step holding the
// weights under their Hugging Face names, the AdamW moments
// ("adam.m.<name>", "adam.v.<name>") and, in the metadata, the counters a
// resumed run needs to continue bit for bit (steps, updates applied, the
// loss scaler's state, the data seed) and the settings the run was started
// with ("setting.model", "setting.layout", "setting.dtype", "setting.data"),
// which a resumed run must share. Files are written atomically
// (temporary file, fsync, rename), so a kill leaves the previous checkpoints
// and never a torn one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "formats/safetensors.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::runtime {

struct TrainingState {
  int64_t step = 0;    // iterations done (the data and the learning rate follow it)
  int64_t updates = 0; // AdamW updates applied; an overflowing step applies none
  double loss_scale = 1;
  int64_t good_steps = 0;
  int64_t overflows_in_a_row = 0;
  uint64_t seed = 0;
  // What the run trains (model, layout, dtype, data), by key without the
  // "setting." prefix; empty in checkpoints written before settings were kept.
  std::map<std::string, std::string> settings;
  std::map<std::string, Tensor> weights;
  std::map<std::string, Tensor> moments;
};

// DIR/step-<step>.safetensors: where writeCheckpoint puts a step's state.
std::string checkpointPath(const std::string &dir, int64_t step);
// DIR/step-<step>.safetensors (DIR created when missing); returns the path.
Expected<std::string> writeCheckpoint(const std::string &dir, const TrainingState &state);
// Reads and checks a checkpoint: counters whole and non-negative, the step
// that of the file's name, the loss scale finite and within
// [1, kMaxLossScale], every tensor finite and every second moment
// (adam.v.*) non-negative. An error names the file and what is wrong.
Expected<TrainingState> readCheckpoint(const std::string &path);
// The state in a safetensors file already read; `path` names it in errors.
Expected<TrainingState> checkpointFromSafetensors(SafetensorsFile file, const std::string &path);
// The checkpoint of the highest step in `dir`; nothing when there is none.
Expected<std::optional<std::string>> latestCheckpoint(const std::string &dir);
// Removes all but the `keep` newest step files of `dir`, each with its
// export folder (the folder first: a kill between leaves an old step file,
// which the next pruning removes, never an orphaned folder); returns how
// many it removed.
Expected<int> pruneCheckpoints(const std::string &dir, int64_t keep);
// The folder beside checkpoint file `checkpoint` that holds what a run
// exports with it (a LoRA run's PEFT adapter): "DIR/step-000020-adapter".
// The trainer writes it whole before it publishes the step file, so a
// checkpoint that exists has its export.
std::string checkpointExportDir(const std::string &checkpoint);
// The settings of `state` that differ from `now`, as "model 'a' (now 'b')";
// empty when they agree. Keys either side lacks are not compared.
std::string settingsDiffer(const std::map<std::string, std::string> &recorded,
                           const std::map<std::string, std::string> &now);

} // namespace kiln::runtime
