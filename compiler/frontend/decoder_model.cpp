// Builds a decoder's forward graph node by node, mirroring the family's
// Hugging Face modeling file (modeling_qwen.py, modeling_qwen2.py,
// modeling_llama.py, modeling_qwen3.py).
//
// Training graph only: Qwen v1's use_logn_attn and use_dynamic_ntk change
// attention just when generating past seq_length, so they are read but not
// applied here.
#include "compiler/frontend/decoder_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "compiler/frontend/decoder_model_checks.h"
#include "compiler/frontend/decoder_rotary.h"
#include "ops/op_builder.h"

namespace kiln::frontend {

namespace {

class ForwardBuilder {
public:
  ForwardBuilder(Graph &graph, const DecoderConfig &config, const ModelOptions &options,
                 int64_t seq, std::unordered_map<std::string, ValueId> params)
      : b_(graph), config_(config), fam_(*config.family), dt_(options.dtype), B_(options.batch),
        S_(seq), H_(config.hidden_size), tp_(options.tensor_parallel),
        heads_(config.num_attention_heads / tp_),
        kv_heads_(std::max<int64_t>(config.kvHeads() / tp_, 1)),
        kv_groups_(config.kvHeads() < tp_ ? config.kvHeads() : 1), hd_(config.headDim()),
        A_(heads_ * hd_), KV_(kv_heads_ * hd_), F_(config.mlpWidth() / tp_),
        V_(paddedLength(config.vocab_size, tp_) / tp_), sp_(options.sequence_parallel && tp_ > 1),
        lora_scale_(0), params_(std::move(params)) {
    if (options.lora.enabled())
      lora_scale_ = options.lora.scale();
    if (options.lora.enabled() && options.lora.dropout > 0) {
      lora_dropout_ = options.lora.dropout;
      dropout_seed_ = graph.addInput(kLoraDropoutSeedName, TensorType{DType::I64, {}},
                                     InputRole::Hyperparameter);
    }
    if (tp_ > 1)
      tp_rank_ = graph.addInput(kTensorParallelRankName, TensorType{DType::I64, {}},
                                InputRole::Hyperparameter);
    b_.setProvenance(Provenance{"frontend", {}});
  }

  Status build(ValueId input_ids, ValueId labels) {
    Graph &g = b_.graph();
    ValueId x;
    {
      auto model = b_.scope(fam_.model);
      x = embedding(input_ids);
      rotary_ = rotaryTables(b_, config_, S_);
      for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
        auto layer = b_.scope(std::string(fam_.layers) + "." + std::to_string(i));
        x = block(i, x);
      }
      x = rmsNorm(x, sequenceReplicated(param(fam_.finalNormWeight()), fam_.final_norm),
                  fam_.final_norm);
    }
    ValueId lm_w =
        config_.tie_word_embeddings ? param(fam_.embeddingWeight()) : param("lm_head.weight");
    x = enterRegion(x, "lm_head");
    ValueId logits = linear("lm_head", x, H_, V_, lm_w, kNoValue);
    logits = cast(logits, dt_, DType::F32, "lm_head.to_f32");
    ValueId loss = shiftedLoss(logits, labels);
    KILN_RETURN_IF_ERROR(b_.status());
    g.addOutput("logits", logits);
    g.addOutput("loss", loss);
    return Status::ok();
  }

private:
  ValueId param(const std::string &name) const {
    auto it = params_.find(name);
    assert(it != params_.end() && "decoderParameters() and the builder disagree");
    return it->second;
  }
  ValueId cast(ValueId x, DType from, DType to, std::string_view name) {
    return castTo(b_, x, from, to, name);
  }

  ValueId reshape(ValueId x, Shape shape, std::string_view name) {
    return reshapeTo(b_, x, std::move(shape), name);
  }

  // x [B,S,in] -> [B,S,out] through nn.Linear (weight [out,in]).
  ValueId linear(const std::string &name, ValueId x, int64_t in, int64_t out, ValueId weight,
                 ValueId bias) {
    ValueId flat = reshape(x, {B_ * S_, in}, name + ".flatten");
    ValueId y = b_.create("MatMul", name, {flat, weight}, {{"transpose_b", true}});
    if (bias != kNoValue)
      y = b_.create("BiasAdd", name + ".bias_add", {y, bias});
    return reshape(y, {B_, S_, out}, name + ".unflatten");
  }

  // y [B,S,out] of the linear `module` plus its LoRA term, when it has
  // adapters: (alpha / r) * x A^T B^T, in the model's dtype. `x` is the
  // layer's input as this rank holds it: a column-parallel layer's whole
  // input before its TensorParallelCopy (A is replicated, B split with the
  // weight, so the low-rank activation is copied in and its gradient summed
  // over the ranks), a row-parallel layer's piece (A split with the weight,
  // so the partial low-rank activation is summed, B replicated). The term is
  // added after the bias, as PEFT adds it to the base layer's output.
  ValueId withLora(const std::string &module, std::string_view name, ValueId y, ValueId x,
                   int64_t in, int64_t out, bool row_parallel) {
    auto a = params_.find(loraAName(module));
    if (a == params_.end())
      return y;
    const std::string n(name);
    ValueId flat = reshape(x, {B_ * S_, in}, n + ".lora_flatten");
    const int64_t stream = lora_sites_++;
    if (dropout_seed_ != kNoValue)
      flat = b_.create("Dropout", n + ".lora_dropout", {flat, dropout_seed_},
                       {{"p", lora_dropout_}, {"stream", stream}});
    ValueId a_w = cast(a->second, DType::F32, dt_, n + ".lora_A.cast");
    ValueId low = b_.create("MatMul", n + ".lora_A", {flat, a_w}, {{"transpose_b", true}});
    low = tensorParallel(row_parallel ? "TensorParallelReduce" : "TensorParallelCopy", low,
                         n + ".lora_tp");
    ValueId b_w = cast(sharedHead(module, param(loraBName(module)), n + ".lora_B"), DType::F32, dt_,
                       n + ".lora_B.cast");
    ValueId d = b_.create("MatMul", n + ".lora_B", {low, b_w}, {{"transpose_b", true}});
    d = b_.create("Mul", n + ".lora_scaling",
                  {d, b_.constant(lora_scale_, dt_, n + ".lora_alpha")});
    d = reshape(d, {B_, S_, out}, n + ".lora_unflatten");
    return b_.create("Add", n + ".lora_add", {y, d});
  }

  // wte: each rank gathers the rows of its vocabulary shard (zero for a
  // token another rank holds) and the ranks' rows are summed.
  ValueId embedding(ValueId input_ids) {
    ValueId table = param(fam_.embeddingWeight());
    const std::string name(fam_.embedding);
    if (tp_ == 1)
      return b_.create("Gather", name, {table, input_ids});
    ValueId local =
        b_.create("ShardIndex", name + ".shard_index", {input_ids, tp_rank_}, {{"shard_size", V_}});
    ValueId rows = b_.create("Gather", name, {table, local}, {{"skip_out_of_range", true}});
    return exitRegion(rows, name);
  }

  // A weight of a key/value projection (its weight, bias or LoRA B) under
  // more ranks than key/value heads: each rank holds a copy of its head,
  // whose gradient covers the rank's query heads only, so Megatron's f over
  // the ranks sharing the head (a group of consecutive ranks) sums it in
  // the backward. Otherwise the weight as it is.
  ValueId sharedHead(const std::string &module, ValueId weight, const std::string &name) {
    if (config_.kvHeads() >= tp_ || fam_.fused_qkv)
      return weight;
    const std::string attn = "." + std::string(fam_.attention) + ".";
    const bool kv = module.ends_with(attn + std::string(fam_.k)) ||
                    module.ends_with(attn + std::string(fam_.v));
    if (!kv)
      return weight;
    return b_.create("TensorParallelCopy", name + ".head_copy", {weight},
                     {{"ranks", int64_t{tp_}}, {"groups", kv_groups_}});
  }

  // Megatron's f and g around a tensor-parallel layer; nothing on one rank.
  ValueId tensorParallel(const char *op, ValueId x, std::string_view name) {
    if (tp_ == 1)
      return x;
    return b_.create(op, name, {x}, {{"ranks", int64_t{tp_}}});
  }

  // Into a tensor-parallel region (before its column-parallel layers): x
  // as is on every rank (Megatron's f), or under sequence parallelism every
  // rank's slice of the sequence gathered.
  ValueId enterRegion(ValueId x, const std::string &name) {
    if (!sp_)
      return tensorParallel("TensorParallelCopy", x, name.empty() ? "tp_copy" : name + ".tp_copy");
    return b_.create("TensorParallelAllGather", name.empty() ? "sp_gather" : name + ".sp_gather",
                     {x}, {{"ranks", tp_}, {"axis", int64_t{1}}});
  }

  // Out of it (after a row-parallel layer, or the vocab-parallel
  // embedding): the ranks' partial results summed (Megatron's g), or under
  // sequence parallelism summed and each rank's slice of the sequence kept.
  ValueId exitRegion(ValueId x, const std::string &name) {
    if (!sp_)
      return tensorParallel("TensorParallelReduce", x, name + ".tp_reduce");
    return b_.create("TensorParallelReduceScatter", name + ".sp_reduce_scatter", {x},
                     {{"ranks", tp_}, {"axis", int64_t{1}}});
  }

  // A replicated weight applied to the sequence's slices (a norm's, a
  // row-parallel bias): each rank's gradient covers its slice only, so
  // under sequence parallelism Megatron's f sums it over the ranks.
  ValueId sequenceReplicated(ValueId weight, std::string_view name) {
    if (!sp_)
      return weight;
    return tensorParallel("TensorParallelCopy", weight, std::string(name) + ".sp_copy");
  }

  // A row-parallel nn.Linear: each rank's partial product, summed over the
  // ranks, then the bias once.
  ValueId rowParallelLinear(const std::string &name, ValueId x, int64_t in, int64_t out,
                            ValueId weight, ValueId bias) {
    if (tp_ == 1)
      return linear(name, x, in, out, weight, bias);
    ValueId y = linear(name, x, in, out, weight, kNoValue);
    y = exitRegion(y, name);
    return bias == kNoValue ? y
                            : b_.create("BiasAdd", name + ".bias_add",
                                        {y, sequenceReplicated(bias, name + ".bias")});
  }

  // RMSNorm over the last axis in f32: x * rsqrt(mean(x^2) + eps), cast
  // back, times weight. `axis` is the last axis: 2 for [B,S,H], 3 for
  // Qwen3's per-head norms on [B,S,heads,hd].
  ValueId rmsNorm(ValueId x, ValueId weight, std::string_view name, int64_t axis = 2) {
    auto s = b_.scope(name);
    ValueId xf = cast(x, dt_, DType::F32, "to_f32");
    ValueId sq = b_.create("Mul", "square", {xf, xf});
    ValueId ms = b_.create("ReduceMean", "mean", {sq},
                           {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}});
    ValueId eps = b_.constant(config_.rms_norm_eps, DType::F32, "eps");
    ValueId inv = b_.create("Rsqrt", "rsqrt", {b_.create("Add", "add_eps", {ms, eps})});
    ValueId y = cast(b_.create("Mul", "normalize", {xf, inv}), DType::F32, dt_, "to_dtype");
    return b_.create("Mul", "mul_weight", {y, weight});
  }

  // The family's q, k and v projections of x (this rank's heads), each
  // [B,S,width]: Qwen v1's one c_attn split in three, or three linears.
  std::vector<ValueId> projectQkv(const std::string &p, ValueId input, ValueId x) {
    const bool bias = config_.hasBias(fam_.qkv_bias);
    auto bias_of = [&](const std::string &module) {
      return bias ? sharedHead(module, param(module + ".bias"),
                               module.substr(module.rfind('.') + 1) + ".bias")
                  : kNoValue;
    };
    std::vector<ValueId> parts;
    if (fam_.fused_qkv) {
      const std::string m = p + std::string(fam_.qkv), name(fam_.qkv);
      ValueId qkv = linear(name, x, H_, 3 * A_, param(m + ".weight"), bias_of(m));
      qkv = withLora(m, name, qkv, input, H_, 3 * A_, false);
      parts = b_.createMulti("Split", "split", {qkv},
                             {{"axis", int64_t{2}}, {"sizes", std::vector<int64_t>{A_, A_, A_}}});
      if (parts.size() != 3) {
        if (!parts.empty())
          b_.fail(Error(b_.scopedName("split") + ": Split gave " + std::to_string(parts.size()) +
                        " outputs, expected q, k and v"));
        return {};
      }
    } else {
      const std::pair<std::string_view, int64_t> projections[] = {
          {fam_.q, A_}, {fam_.k, KV_}, {fam_.v, KV_}};
      for (const auto &[module, width] : projections) {
        const std::string m = p + std::string(module), name(module);
        ValueId y =
            linear(name, x, H_, width, sharedHead(m, param(m + ".weight"), name), bias_of(m));
        parts.push_back(withLora(m, name, y, input, H_, width, false));
      }
    }
    return parts;
  }

  // Each group of query heads attends with its key/value head: q
  // [B,heads,S,hd] is seen as [B,kv_heads,group*S,hd] (the heads of a group
  // are adjacent, as Hugging Face's repeat_kv pairs them), so one batched
  // matmul per key/value head serves the whole group and K and V are never
  // repeated; the scores go back to [B,heads,S,S] for the mask and softmax.
  // Without groups (multi-head attention) no reshape is made.
  ValueId grouped(ValueId x, int64_t rows, int64_t cols, std::string_view name) {
    if (kv_heads_ == heads_)
      return x;
    const int64_t group = heads_ / kv_heads_;
    return reshape(x, {B_, kv_heads_, group * rows, cols}, name);
  }
  ValueId ungrouped(ValueId x, int64_t cols, std::string_view name) {
    if (kv_heads_ == heads_)
      return x;
    return reshape(x, {B_, heads_, S_, cols}, name);
  }

  // softmax(q k^T / sqrt(hd) + causal mask) v on [B,heads,S,hd] (k and v
  // [B,kv_heads,S,hd]), the softmax in f32 where the model takes it so.
  ValueId attentionCore(ValueId q, ValueId k, ValueId v) {
    ValueId scores = b_.create("BatchMatMul", "scores", {grouped(q, S_, hd_, "q_groups"), k},
                               {{"transpose_b", true}});
    scores = ungrouped(scores, S_, "scores_heads");
    if (config_.scale_attn_weights) {
      ValueId norm = b_.constant(std::sqrt(static_cast<double>(hd_)), dt_, "scale_factor");
      scores = b_.create("Div", "scale", {scores, norm});
    }
    scores = b_.create("CausalMask", "causal_mask", {scores}, {{"fill", lowestFinite(dt_)}});
    const DType softmax_dt = config_.softmax_in_fp32 ? DType::F32 : dt_;
    scores = cast(scores, dt_, softmax_dt, "softmax_to_f32");
    ValueId probs = b_.create("Softmax", "softmax", {scores}, {{"axis", int64_t{3}}});
    probs = cast(probs, softmax_dt, dt_, "softmax_to_dtype");
    ValueId ctx = b_.create("BatchMatMul", "context", {grouped(probs, S_, S_, "probs_groups"), v});
    return ungrouped(ctx, hd_, "context_heads");
  }

  ValueId attention(int64_t i, ValueId x) {
    auto s = b_.scope(fam_.attention);
    const std::string p = fam_.layerPrefix(i) + std::string(fam_.attention) + ".";
    const ValueId input = x;
    x = enterRegion(x, "");
    std::vector<ValueId> qkv = projectQkv(p, input, x);
    if (qkv.empty())
      return kNoValue;
    // Heads, Qwen3's per-head norm, then the rotary embedding.
    auto heads = [&](ValueId x, int64_t n, std::string_view which, std::string_view norm) {
      x = reshape(x, {B_, S_, n, hd_}, std::string(which) + "_heads");
      if (!norm.empty()) {
        // Each rank normalises its own heads with the whole (replicated)
        // weight, so its gradient is partial: Megatron's f sums it over the
        // ranks in the backward.
        ValueId weight =
            tensorParallel("TensorParallelCopy", param(p + std::string(norm) + ".weight"),
                           std::string(norm) + ".tp_copy");
        x = rmsNorm(x, weight, norm, 3);
      }
      return x;
    };
    ValueId q = applyRotary(b_, rotary_, heads(qkv[0], heads_, "q", fam_.q_norm), "rotary_q",
                            {B_, S_, heads_, hd_}, dt_);
    ValueId k = applyRotary(b_, rotary_, heads(qkv[1], kv_heads_, "k", fam_.k_norm), "rotary_k",
                            {B_, S_, kv_heads_, hd_}, dt_);
    ValueId v = heads(qkv[2], kv_heads_, "v", "");
    const AttrMap to_bhsd = {{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
    q = b_.create("Transpose", "q_transpose", {q}, to_bhsd);
    k = b_.create("Transpose", "k_transpose", {k}, to_bhsd);
    v = b_.create("Transpose", "v_transpose", {v}, to_bhsd);

    ValueId ctx = attentionCore(q, k, v);
    ctx = b_.create("Transpose", "context_transpose", {ctx}, to_bhsd);
    ctx = reshape(ctx, {B_, S_, A_}, "merge_heads");
    const std::string o = p + std::string(fam_.o);
    ValueId y = rowParallelLinear(std::string(fam_.o), ctx, A_, H_, param(o + ".weight"),
                                  config_.hasBias(fam_.o_bias) ? param(o + ".bias") : kNoValue);
    return withLora(o, fam_.o, y, ctx, A_, H_, true);
  }

  // down(up(x) * silu(gate(x))); Qwen v1: c_proj(w1(x) * silu(w2(x))).
  ValueId mlp(int64_t i, ValueId x) {
    auto s = b_.scope(fam_.mlp);
    const std::string p = fam_.layerPrefix(i) + std::string(fam_.mlp) + ".";
    const bool bias = config_.hasBias(fam_.mlp_bias);
    const ValueId input = x;
    x = enterRegion(x, "");
    auto columnLinear = [&](std::string_view module) {
      const std::string m = p + std::string(module), name(module);
      ValueId y =
          linear(name, x, H_, F_, param(m + ".weight"), bias ? param(m + ".bias") : kNoValue);
      return withLora(m, name, y, input, H_, F_, false);
    };
    ValueId up = columnLinear(fam_.up);
    ValueId gate = columnLinear(fam_.gate);
    ValueId m = b_.create("Mul", "mul", {up, b_.create("Silu", "act", {gate})});
    const std::string down = p + std::string(fam_.down);
    ValueId y = rowParallelLinear(std::string(fam_.down), m, F_, H_, param(down + ".weight"),
                                  bias ? param(down + ".bias") : kNoValue);
    return withLora(down, fam_.down, y, m, F_, H_, true);
  }

  ValueId block(int64_t i, ValueId x) {
    const std::string p = fam_.layerPrefix(i);
    auto norm = [&](ValueId x, std::string_view which) {
      ValueId w = param(p + std::string(which) + ".weight");
      return rmsNorm(x, sequenceReplicated(w, which), which);
    };
    ValueId attn = attention(i, norm(x, fam_.input_norm));
    ValueId h = b_.create("Add", "attn_residual", {x, attn});
    ValueId m = mlp(i, norm(h, fam_.post_attention_norm));
    return b_.create("Add", "mlp_residual", {h, m});
  }

  // Cross entropy of logits[:, :-1] against labels[:, 1:]; under tensor
  // parallelism each rank holds V/t columns of the logits.
  ValueId shiftedLoss(ValueId logits, ValueId labels) {
    const int64_t V = V_;
    ValueId sl = b_.create(
        "Slice", "loss.shift_logits", {logits},
        {{"begin", std::vector<int64_t>{0, 0, 0}}, {"end", std::vector<int64_t>{B_, S_ - 1, V}}});
    ValueId tl =
        b_.create("Slice", "loss.shift_labels", {labels},
                  {{"begin", std::vector<int64_t>{0, 1}}, {"end", std::vector<int64_t>{B_, S_}}});
    sl = reshape(sl, {B_ * (S_ - 1), V}, "loss.flatten_logits");
    tl = reshape(tl, {B_ * (S_ - 1)}, "loss.flatten_labels");
    if (tp_ == 1)
      return b_.create("CrossEntropyLoss", "loss", {sl, tl});
    return vocabParallelLoss(sl, tl);
  }

  // Megatron's vocab-parallel cross entropy: the row max and the sum of
  // exponentials reduced over the ranks, each rank's part of the loss (the
  // rows whose label it holds) summed; the logits are never gathered.
  // A padded vocabulary (the ranks do not divide it): the ops leave the
  // padding columns, the last ranks' past vocab_size, out of the max, the
  // sum and the loss, and give them no gradient.
  ValueId vocabParallelLoss(ValueId logits, ValueId labels) {
    auto s = b_.scope("loss");
    const bool padded = V_ * tp_ != config_.vocab_size;
    AttrMap stat, loss{{"ranks", int64_t{tp_}}};
    std::vector<ValueId> rank;
    if (padded) {
      stat.set("vocab", config_.vocab_size);
      loss.set("vocab", config_.vocab_size);
      rank.push_back(tp_rank_);
    }
    std::vector<ValueId> in = {logits};
    in.insert(in.end(), rank.begin(), rank.end());
    ValueId max = b_.create("VocabParallelMax", "shard_max", in, stat);
    max = b_.create("TensorParallelMax", "max", {max}, {{"ranks", int64_t{tp_}}});
    in = {logits, max};
    in.insert(in.end(), rank.begin(), rank.end());
    ValueId sum = b_.create("VocabParallelSumExp", "shard_sum_exp", in, stat);
    sum = tensorParallel("TensorParallelReduce", sum, "sum_exp");
    ValueId part = b_.create("VocabParallelCrossEntropy", "shard_loss",
                             {logits, labels, tp_rank_, max, sum}, loss);
    return tensorParallel("TensorParallelReduce", part, "loss");
  }

  ops::OpBuilder b_;
  const DecoderConfig &config_;
  const DecoderFamily &fam_;
  DType dt_;
  int64_t B_, S_, H_;
  int64_t tp_;              // tensor-parallel ranks
  int64_t heads_;           // this rank's query heads
  int64_t kv_heads_;        // this rank's key/value heads (one, replicated, under more ranks)
  int64_t kv_groups_;       // the ranks' groups sharing a key/value head: the heads, or 1
  int64_t hd_;              // channels per head
  int64_t A_;               // this rank's query width: heads_ * hd_
  int64_t KV_;              // this rank's key (and value) width: kv_heads_ * hd_
  int64_t F_;               // this rank's MLP width
  int64_t V_;               // this rank's vocabulary rows (padding included: tensor_split.h)
  bool sp_;                 // sequence parallelism: the residual stream holds [B, S/tp, H]
  double lora_scale_;       // alpha / r
  double lora_dropout_ = 0; // its probability, with dropout_seed_
  ValueId dropout_seed_ = kNoValue;
  ValueId tp_rank_ = kNoValue; // with tp_ > 1
  int64_t lora_sites_ = 0;     // adapted linears so far: each one's dropout stream
  std::unordered_map<std::string, ValueId> params_;
  RotaryTables rotary_;
};

} // namespace

Expected<Graph> buildDecoderForward(const DecoderConfig &config, const ModelOptions &options) {
  KILN_RETURN_IF_ERROR(checkForwardOptions(config, options));
  const int64_t seq = options.seq == 0 ? config.seq_length : options.seq;
  const int tp = options.tensor_parallel;

  Graph graph(std::string(config.family->name));
  const Shape tokens = {options.batch, seq};
  ValueId input_ids = graph.addInput("input_ids", {DType::I64, tokens}, InputRole::Data);
  ValueId labels = graph.addInput("labels", {DType::I64, tokens}, InputRole::Data);
  std::unordered_map<std::string, ValueId> params;
  const bool lora = options.lora.enabled();
  for (ParamSpec &p : decoderParameters(config)) {
    KILN_ASSIGN_OR_RETURN(Shape shape, splitShape(p.shape, p.split, tp));
    params[p.name] = graph.addInput(p.name, {options.dtype, shape},
                                    lora ? InputRole::Frozen : InputRole::Parameter);
  }
  if (lora) {
    KILN_ASSIGN_OR_RETURN(std::vector<ParamSpec> adapters, loraParameters(config, options.lora));
    for (ParamSpec &p : adapters) {
      KILN_ASSIGN_OR_RETURN(Shape shape, splitShape(p.shape, p.split, tp));
      params[p.name] = graph.addInput(p.name, {DType::F32, shape}, InputRole::Parameter);
    }
  }

  ForwardBuilder builder(graph, config, options, seq, std::move(params));
  KILN_RETURN_IF_ERROR(builder.build(input_ids, labels));
  return graph;
}

} // namespace kiln::frontend
