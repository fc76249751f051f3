#include "compiler/parallel/memory_formula.h"

#include <algorithm>

#include "compiler/frontend/decoder_model.h"
#include "support/byte_size.h"

namespace kiln::parallel {
namespace {

// The parameters one of `tp` ranks holds, as the formula counts them: a
// split parameter's piece (the padded vocabulary's rows, a key/value head
// replicated over the ranks that share it), a replicated one divided by tp
// as Megatron's formula divides every parameter.
double parametersPerRank(const std::vector<frontend::ParamSpec> &specs, int tp) {
  double n = 0;
  for (const frontend::ParamSpec &p : specs) {
    const Expected<Shape> piece = splitShape(p.shape, p.split, tp);
    n += p.split.replicated() || !piece ? static_cast<double>(numElements(p.shape)) / tp
                                        : static_cast<double>(numElements(*piece));
  }
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
  const double n = layout.dp;
  // ZeRO-2 shards the gradient (the half of `replicated` that is not the weight) too.
  const double optimizer = layout.zero >= 1 ? trained.sharded / n : trained.sharded;
  const double gradient = trained.replicated / 2;
  if (layout.zero == 2)
    trained.replicated = gradient + gradient / n; // ZeRO-2: 2Ψ + 14Ψ/N at 16 bits
  if (layout.zero == 3)
    trained.replicated /= n; // ZeRO-3: 16Ψ/N
  const double pp = layout.pp;
  const double base = parametersPerRank(frontend::decoderParameters(config), layout.tp);
  double states = 0;
  if (lora.enabled()) {
    auto adapters = frontend::loraParameters(config, lora);
    const double a = adapters ? parametersPerRank(*adapters, layout.tp) : 0;
    states = (base * w + a * (trained.replicated + optimizer)) / pp;
  } else {
    states = base * (trained.replicated + optimizer) / pp;
  }
  const double s = static_cast<double>(seq), b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(config.hidden_size);
  const double heads = static_cast<double>(config.num_attention_heads);
  const double tp = layout.tp;
  const double attention_core =
      recompute == passes::RecomputeMode::None && !fused_attention ? 5 * heads * s / (h * tp) : 0;
  // Of the 24 tensor-parallel sbh, K and V hold 2 each; with grouped-query
  // attention they shrink to kv_heads / heads of that, and a rank holds
  // kv_heads / t of the heads, or one replicated head when there are fewer
  // than t.
  const double kv_per_rank = std::max(static_cast<double>(config.kvHeads()) / tp, 1.0);
  const double split_per_rank = 20 / tp + 4 * kv_per_rank / heads;
  // Outside the tensor-parallel regions the paper's GPT layer keeps 10sbh:
  // two LayerNorm inputs (4), two dropout masks (2) and the two column-
  // parallel projections' inputs (4). The decoder layer kiln builds (Hugging
  // Face's) has no dropout (a config with it is refused) and computes each
  // RMSNorm in f32, keeping its input at 4 bytes an element and its
  // normalised output for the weight's gradient: 2(4 + w) + 2w bytes, 16sbh
  // at 16 bits. Sequence parallelism splits all of it over the ranks (the
  // projections' inputs too: SequenceRegatherPass gathers them again for
  // the backward), as it splits the paper's 10: sbh(40 + 5as/h)/t.
  const double outside = 2 * (4 + w) + 2 * w;
  const double whole = layout.sequenceParallel() ? outside / tp : outside;
  // Full recomputation keeps the layer's input, 2sbh at 16 bits (/t under
  // sequence parallelism).
  const double kept = recompute == passes::RecomputeMode::Full
                          ? (layout.sequenceParallel() ? w / tp : w)
                          : whole + (split_per_rank + attention_core) * (w / 2);
  double per_layer = s * b * h * kept;
  if (fused_attention && recompute != passes::RecomputeMode::Full)
    per_layer += 8 * s * b * heads / tp; // softmax_max and softmax_sum, f32

  MemoryFormula f;
  f.model_states = static_cast<int64_t>(states);
  // Device 0 of a pipeline holds the layers' activations of P micro-batches
  // of L/P layers (L in all); interleaved over V model stages a device, of
  // min(MV, PV + P - 1) model stages' micro-batches of L/(PV) layers each
  // (its warm-up and one more): L(1 + (P - 1)/(PV)) once M > P
  // (Korthikanti et al. 2022, section 4.2.3).
  double layers = static_cast<double>(config.num_hidden_layers);
  if (layout.virtual_stages > 1) {
    const double P = layout.pp, V = layout.virtual_stages, M = layout.grad_accum;
    layers *= std::min(M * V, P * V + P - 1) / (P * V);
  }
  f.activations = static_cast<int64_t>(per_layer * layers);
  return f;
}

} // namespace kiln::parallel
