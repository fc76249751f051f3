#include "compiler/frontend/decoder_model_checks.h"

#include <string>

namespace kiln::frontend {

namespace {

constexpr int64_t kMaxTokens = (int64_t{1} << 31) - 1;

// Tensor parallelism splits the query and key/value heads and the MLP width
// evenly over the ranks (the vocabulary is padded when they do not divide it).
Status checkTensorParallel(const DecoderConfig &config, int tp) {
  if (tp < 1)
    return Error("decoder forward: tensor parallelism over " + std::to_string(tp) +
                 " ranks: expected at least 1");
  // Fewer key/value heads than ranks: each head is replicated over the
  // ranks whose query heads use it, which needs whole groups of ranks.
  const int64_t kv = config.kvHeads();
  if (kv < tp && tp % kv != 0)
    return Error("decoder forward: tensor parallelism over " + std::to_string(tp) +
                 " ranks: with fewer num_key_value_heads (" + std::to_string(kv) +
                 ") than ranks, each key/value head is replicated over the ranks that use it, "
                 "so the ranks must be a multiple of them");
  const std::pair<const char *, int64_t> divided[] = {
      {"num_attention_heads", config.num_attention_heads},
      {"num_key_value_heads", kv < tp ? tp : kv},
      {config.family->intermediate_is_twice_mlp ? "the MLP width (intermediate_size / 2)"
                                                : "intermediate_size",
       config.mlpWidth()}};
  for (const auto &[what, n] : divided)
    if (n % tp != 0)
      return Error("decoder forward: tensor parallelism over " + std::to_string(tp) +
                   " ranks: it must divide " + what + " (" + std::to_string(n) +
                   "); kiln splits every head and MLP column evenly");
  return Status::ok();
}

} // namespace

Status checkForwardOptions(const DecoderConfig &config, const ModelOptions &options) {
  KILN_RETURN_IF_ERROR(validateDecoderConfig(config, "decoder config"));
  const std::string model(config.family->architecture);
  if (!isFloat(options.dtype))
    return Error(model + " forward: dtype " + std::string(dtypeName(options.dtype)) +
                 ": expected f32, f16 or bf16");
  const int64_t seq = options.seq == 0 ? config.seq_length : options.seq;
  if (seq < 2 || seq > config.max_position_embeddings)
    return Error(model + " forward: sequence length " + std::to_string(seq) +
                 ": expected at least 2 (the loss predicts each next token) and at most "
                 "max_position_embeddings (" +
                 std::to_string(config.max_position_embeddings) + ")");
  if (options.batch < 1 || options.batch > kMaxTokens / seq)
    return Error(model + " forward: batch " + std::to_string(options.batch) +
                 ": expected at least 1 and batch * sequence length at most " +
                 std::to_string(kMaxTokens));
  const int tp = options.tensor_parallel;
  KILN_RETURN_IF_ERROR(checkTensorParallel(config, tp));
  if (options.sequence_parallel && tp > 1) {
    if (seq % tp != 0)
      return Error(model + " forward: sequence parallelism over " + std::to_string(tp) +
                   " ranks: the sequence length " + std::to_string(seq) +
                   " must divide by them (each rank holds an equal slice of it)");
    if (options.lora.enabled())
      return Error(model + " forward: sequence parallelism with LoRA adapters is not built; "
                           "train the adapters without --sequence-parallel");
  }
  return Status::ok();
}

} // namespace kiln::frontend
