#include "compiler/parallel/memory_formula.h"

#include "compiler/frontend/decoder_model.h"
#include "ir/byte_size.h"

namespace kiln::parallel {
namespace {

int64_t parameters(const std::vector<frontend::ParamSpec> &specs) {
  int64_t n = 0;
  for (const frontend::ParamSpec &p : specs)
    n = saturatingAdd(n, numElements(p.shape));
  return n;
}

// Bytes per trained parameter: weight + gradient, and the optimizer part
// (master weight, m, v) that ZeRO-1 shards.
struct PerParameter {
  double replicated, sharded;
};

} // namespace

std::string MemoryFormula::toText() const {
  return "model states " + formatBytes(model_states) + " + activations " +
         formatBytes(activations) + " = " + formatBytes(total());
}

MemoryFormula memoryFormula(const frontend::DecoderConfig &config, const frontend::LoraConfig &lora,
                            const ParallelConfig &layout, int64_t micro_batch, int64_t seq,
                            DType dtype, passes::RecomputeMode recompute, bool fused_attention) {
  const double w = static_cast<double>(dtypeSize(dtype));
  PerParameter trained = w == 2 ? PerParameter{4, 12} : PerParameter{2 * w, 2 * w};
  // Pipeline stages split the parameters as tensor parallelism does; the
  // first stage holds P micro-batches of L/P layers each: L layers' worth
  // of activations, as without stages (Narayanan et al. 2021).
  const double t = static_cast<double>(layout.tp) * layout.pp, n = layout.dp;
  // ZeRO-2 shards the gradient (the half of `replicated` that is not the weight) too.
  const double optimizer = layout.zero >= 1 ? trained.sharded / n : trained.sharded;
  const double gradient = trained.replicated / 2;
  if (layout.zero == 2)
    trained.replicated = gradient + gradient / n; // ZeRO-2: 2Ψ + 14Ψ/N at 16 bits
  if (layout.zero == 3)
    trained.replicated /= n; // ZeRO-3: 16Ψ/N
  const double base = static_cast<double>(parameters(frontend::decoderParameters(config)));
  double states = 0;
  if (lora.enabled()) {
    auto adapters = frontend::loraParameters(config, lora);
    const double a = adapters ? static_cast<double>(parameters(*adapters)) : 0;
    states = (base * w + a * (trained.replicated + optimizer)) / t;
  } else {
    states = base * (trained.replicated + optimizer) / t;
  }
  const double s = static_cast<double>(seq), b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(config.hidden_size);
  const double heads = static_cast<double>(config.num_attention_heads);
  const double tp = layout.tp;
  const double attention_core =
      recompute == passes::RecomputeMode::None && !fused_attention ? 5 * heads * s / (h * tp) : 0;
  // Of the 24 tensor-parallel sbh, K and V hold 2 each; with grouped-query
  // attention they shrink to kv_heads / heads of that.
  const double kv_share = static_cast<double>(config.kvHeads()) / heads;
  const double split = 20 + 4 * kv_share;
  // Sequence parallelism splits the 10 the ranks held whole (the norms'
  // and residuals' inputs, the dropout masks) over them too:
  // sbh(34 + 5as/h)/t, and full recomputation's kept input 2sbh/t.
  const double whole = layout.sequenceParallel() ? 10 / tp : 10;
  const double kept = recompute == passes::RecomputeMode::Full
                          ? (layout.sequenceParallel() ? 2 / tp : 2)
                          : whole + split / tp + attention_core;
  double per_layer = s * b * h * kept * (w / 2);
  if (fused_attention && recompute != passes::RecomputeMode::Full)
    per_layer += 8 * s * b * heads / tp; // softmax_max and softmax_sum, f32

  MemoryFormula f;
  f.model_states = static_cast<int64_t>(states);
  f.activations = static_cast<int64_t>(per_layer * static_cast<double>(config.num_hidden_layers));
  return f;
}

} // namespace kiln::parallel
