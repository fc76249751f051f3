#include "runtime/batch_feed.h"

#include "support/splitmix.h"

namespace kiln::runtime {

BatchFeed::BatchFeed(const TokenData &data, const parallel::TrainingSignature &signature,
                     int64_t batch_per_replica, int64_t micro_batch, uint64_t seed)
    : data_(data), loss_scale_(signature.loss_scale), dropout_seed_(signature.dropout_seed),
      batch_per_replica_(batch_per_replica), micro_batch_(micro_batch), seed_(seed) {}

ops::TensorMap BatchFeed::microBatch(int64_t step, int replica, int k, double scale) const {
  Tensor ids =
      data_.batch(seed_, step, replica * batch_per_replica_ + k * micro_batch_, micro_batch_);
  ops::TensorMap inputs;
  inputs["input_ids"] = ids;
  inputs["labels"] = ids;
  inputs[loss_scale_] = Tensor::scalar(DType::F32, scale);
  // Dropout's masks: new every step, replica and micro-batch, the same on
  // the ranks of a replica (they see the same activations), as a resumed
  // run draws them.
  if (!dropout_seed_.empty()) {
    const uint64_t site =
        splitmix64(static_cast<uint64_t>(replica) << 32 | static_cast<uint64_t>(k));
    inputs[dropout_seed_] = Tensor::fromInts(
        DType::I64, {},
        {static_cast<int64_t>(splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(step) ^ site)))});
  }
  return inputs;
}

} // namespace kiln::runtime
