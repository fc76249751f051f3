// What each run of the compiled step reads besides the weights: a
// micro-batch's token ids (input_ids, and the same ids as labels: the model
// shifts them itself), the loss scale, and dropout's seed. The sequences
// are those of the global batch the replica's micro-batch covers
// (token_data.h draws them from the seed and the step alone), so a resumed
// run and any layout of the same batch read the same tokens.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/parallel/training_program.h"
#include "ops/interpreter.h"
#include "runtime/token_data.h"

namespace kiln::runtime {

class BatchFeed {
public:
  // `data` must outlive the feed; `batch_per_replica` sequences per replica
  // and step, in micro-batches of `micro_batch`.
  BatchFeed(const TokenData &data, const parallel::TrainingSignature &signature,
            int64_t batch_per_replica, int64_t micro_batch, uint64_t seed);

  uint64_t seed() const { return seed_; }
  // A resumed run's data continues as it began: with the checkpoint's seed.
  void reseed(uint64_t seed) { seed_ = seed; }

  // The inputs of micro-batch `k` of replica `replica` (in the job) at step
  // `step` (0-based) under loss scale `scale`.
  ops::TensorMap microBatch(int64_t step, int replica, int k, double scale) const;

private:
  const TokenData &data_;
  std::string loss_scale_, dropout_seed_; // the step's input names
  int64_t batch_per_replica_, micro_batch_;
  uint64_t seed_;
};

} // namespace kiln::runtime
