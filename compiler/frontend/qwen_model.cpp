// Builds the Qwen forward graph node by node, mirroring modeling_qwen.py.
//
// Training graph only: use_logn_attn and use_dynamic_ntk change attention
// just when generating past seq_length, so they are read but not applied here.
#include "compiler/frontend/qwen_model.h"

#include <cassert>
#include <cmath>
#include <unordered_map>

#include "ops/op_builder.h"

namespace kiln::frontend {

namespace {

constexpr int64_t kMaxTokens = (int64_t{1} << 31) - 1;

std::string layerPrefix(int64_t i) { return "transformer.h." + std::to_string(i) + "."; }

class ForwardBuilder {
public:
  ForwardBuilder(Graph &graph, const QwenConfig &config, const ModelOptions &options, int64_t seq,
                 std::unordered_map<std::string, ValueId> params)
      : b_(graph), config_(config), dt_(options.dtype), B_(options.batch), S_(seq),
        H_(config.hidden_size), tp_(options.tensor_parallel),
        heads_(config.num_attention_heads / tp_), hd_(config.kv_channels), A_(H_ / tp_),
        F_(config.mlpWidth() / tp_), V_(config.vocab_size / tp_), rot_(config.rotaryDim()),
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
      auto transformer = b_.scope("transformer");
      x = embedding(input_ids);
      rotaryTables();
      for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
        auto layer = b_.scope("h." + std::to_string(i));
        x = block(i, x);
      }
      x = rmsNorm(x, param("transformer.ln_f.weight"), "ln_f");
    }
    ValueId lm_w =
        config_.tie_word_embeddings ? param("transformer.wte.weight") : param("lm_head.weight");
    x = tensorParallel("TensorParallelCopy", x, "lm_head.tp_copy");
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
    assert(it != params_.end() && "qwenParameters() and the builder disagree");
    return it->second;
  }
  // kNoValue when the model has no such parameter (biases under no_bias).
  ValueId optionalParam(const std::string &name) const {
    auto it = params_.find(name);
    return it == params_.end() ? kNoValue : it->second;
  }

  // No node when the dtype already matches.
  ValueId cast(ValueId x, DType from, DType to, std::string_view name) {
    if (from == to)
      return x;
    return b_.create("Cast", name, {x}, {{"dtype", to}});
  }

  ValueId reshape(ValueId x, Shape shape, std::string_view name) {
    return b_.create("Reshape", name, {x}, {{"shape", std::move(shape)}});
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
    ValueId b_w = cast(param(loraBName(module)), DType::F32, dt_, n + ".lora_B.cast");
    ValueId d = b_.create("MatMul", n + ".lora_B", {low, b_w}, {{"transpose_b", true}});
    d = b_.create("Mul", n + ".lora_scaling",
                  {d, b_.constant(lora_scale_, dt_, n + ".lora_alpha")});
    d = reshape(d, {B_, S_, out}, n + ".lora_unflatten");
    return b_.create("Add", n + ".lora_add", {y, d});
  }

  // wte: each rank gathers the rows of its vocabulary shard (zero for a
  // token another rank holds) and the ranks' rows are summed.
  ValueId embedding(ValueId input_ids) {
    ValueId table = param("transformer.wte.weight");
    if (tp_ == 1)
      return b_.create("Gather", "wte", {table, input_ids});
    ValueId local =
        b_.create("ShardIndex", "wte.shard_index", {input_ids, tp_rank_}, {{"shard_size", V_}});
    ValueId rows = b_.create("Gather", "wte", {table, local}, {{"skip_out_of_range", true}});
    return tensorParallel("TensorParallelReduce", rows, "wte.tp_reduce");
  }

  // Megatron's f and g around a tensor-parallel layer; nothing on one rank.
  ValueId tensorParallel(const char *op, ValueId x, std::string_view name) {
    if (tp_ == 1)
      return x;
    return b_.create(op, name, {x}, {{"ranks", int64_t{tp_}}});
  }

  // A row-parallel nn.Linear: each rank's partial product, summed over the
  // ranks, then the bias once.
  ValueId rowParallelLinear(const std::string &name, ValueId x, int64_t in, int64_t out,
                            ValueId weight, ValueId bias) {
    if (tp_ == 1)
      return linear(name, x, in, out, weight, bias);
    ValueId y = linear(name, x, in, out, weight, kNoValue);
    y = tensorParallel("TensorParallelReduce", y, name + ".tp_reduce");
    return bias == kNoValue ? y : b_.create("BiasAdd", name + ".bias_add", {y, bias});
  }

  // RMSNorm in f32: x * rsqrt(mean(x^2) + eps), cast back, times weight.
  ValueId rmsNorm(ValueId x, ValueId weight, std::string_view name) {
    auto s = b_.scope(name);
    ValueId xf = cast(x, dt_, DType::F32, "to_f32");
    ValueId sq = b_.create("Mul", "square", {xf, xf});
    ValueId ms = b_.create("ReduceMean", "mean", {sq},
                           {{"axes", std::vector<int64_t>{2}}, {"keepdims", true}});
    ValueId eps = b_.constant(config_.layer_norm_epsilon, DType::F32, "eps");
    ValueId inv = b_.create("Rsqrt", "rsqrt", {b_.create("Add", "add_eps", {ms, eps})});
    ValueId y = cast(b_.create("Mul", "normalize", {xf, inv}), DType::F32, dt_, "to_dtype");
    return b_.create("Mul", "mul_weight", {y, weight});
  }

  // transformer.rotary_emb: cos/sin [S, D] in f32, shaped [1,S,1,D] to
  // broadcast over [B,S,heads,D].
  void rotaryTables() {
    std::vector<ValueId> cs =
        b_.createMulti("RotaryCosSin", "rotary_emb", {},
                       {{"seq_len", S_}, {"dim", rot_}, {"base", config_.rotary_emb_base}});
    if (cs.size() != 2) {
      if (!cs.empty())
        b_.fail(Error(b_.scopedName("rotary_emb") + ": RotaryCosSin gave " +
                      std::to_string(cs.size()) + " outputs, expected cos and sin"));
      return;
    }
    cos_ = reshape(cs[0], {1, S_, 1, rot_}, "rotary_emb.cos");
    sin_ = reshape(cs[1], {1, S_, 1, rot_}, "rotary_emb.sin");
  }

  // apply_rotary_pos_emb on [B,S,heads,hd] in f32; with rotary_pct < 1 only
  // the first D channels turn, the rest pass through.
  ValueId rotary(ValueId x, std::string_view name) {
    auto s = b_.scope(name);
    ValueId xf = cast(x, dt_, DType::F32, "to_f32");
    bool partial = rot_ < hd_;
    ValueId rot = xf;
    ValueId pass = kNoValue;
    if (partial) {
      rot = b_.create("Slice", "rot", {xf},
                      {{"begin", std::vector<int64_t>{0, 0, 0, 0}},
                       {"end", std::vector<int64_t>{B_, S_, heads_, rot_}}});
      pass = b_.create("Slice", "pass", {xf},
                       {{"begin", std::vector<int64_t>{0, 0, 0, rot_}},
                        {"end", std::vector<int64_t>{B_, S_, heads_, hd_}}});
    }
    ValueId with_cos = b_.create("Mul", "mul_cos", {rot, cos_});
    ValueId half = b_.create("RotateHalf", "rotate_half", {rot});
    ValueId with_sin = b_.create("Mul", "mul_sin", {half, sin_});
    ValueId y = b_.create("Add", "add", {with_cos, with_sin});
    if (partial)
      y = b_.create("Concat", "concat", {y, pass}, {{"axis", int64_t{3}}});
    return cast(y, DType::F32, dt_, "to_dtype");
  }

  ValueId attention(int64_t i, ValueId x) {
    auto s = b_.scope("attn");
    const std::string p = layerPrefix(i) + "attn.";
    const ValueId input = x;
    x = tensorParallel("TensorParallelCopy", x, "tp_copy");
    ValueId qkv =
        linear("c_attn", x, H_, 3 * A_, param(p + "c_attn.weight"), param(p + "c_attn.bias"));
    qkv = withLora(p + "c_attn", "c_attn", qkv, input, H_, 3 * A_, false);
    std::vector<ValueId> parts =
        b_.createMulti("Split", "split", {qkv},
                       {{"axis", int64_t{2}}, {"sizes", std::vector<int64_t>{A_, A_, A_}}});
    if (parts.size() != 3) {
      if (!parts.empty())
        b_.fail(Error(b_.scopedName("split") + ": Split gave " + std::to_string(parts.size()) +
                      " outputs, expected q, k and v"));
      return kNoValue;
    }
    const Shape heads_shape = {B_, S_, heads_, hd_};
    const AttrMap to_bhsd = {{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
    ValueId q = rotary(reshape(parts[0], heads_shape, "q_heads"), "rotary_q");
    ValueId k = rotary(reshape(parts[1], heads_shape, "k_heads"), "rotary_k");
    ValueId v = reshape(parts[2], heads_shape, "v_heads");
    q = b_.create("Transpose", "q_transpose", {q}, to_bhsd);
    k = b_.create("Transpose", "k_transpose", {k}, to_bhsd);
    v = b_.create("Transpose", "v_transpose", {v}, to_bhsd);

    ValueId scores = b_.create("BatchMatMul", "scores", {q, k}, {{"transpose_b", true}});
    if (config_.scale_attn_weights) {
      ValueId norm = b_.constant(std::sqrt(static_cast<double>(hd_)), dt_, "scale_factor");
      scores = b_.create("Div", "scale", {scores, norm});
    }
    scores = b_.create("CausalMask", "causal_mask", {scores}, {{"fill", lowestFinite(dt_)}});
    const DType softmax_dt = config_.softmax_in_fp32 ? DType::F32 : dt_;
    scores = cast(scores, dt_, softmax_dt, "softmax_to_f32");
    ValueId probs = b_.create("Softmax", "softmax", {scores}, {{"axis", int64_t{3}}});
    probs = cast(probs, softmax_dt, dt_, "softmax_to_dtype");

    ValueId ctx = b_.create("BatchMatMul", "context", {probs, v});
    ctx = b_.create("Transpose", "context_transpose", {ctx}, to_bhsd);
    ctx = reshape(ctx, {B_, S_, A_}, "merge_heads");
    ValueId y = rowParallelLinear("c_proj", ctx, A_, H_, param(p + "c_proj.weight"),
                                  optionalParam(p + "c_proj.bias"));
    return withLora(p + "c_proj", "c_proj", y, ctx, A_, H_, true);
  }

  // w1(x) * silu(w2(x)), then c_proj.
  ValueId mlp(int64_t i, ValueId x) {
    auto s = b_.scope("mlp");
    const std::string p = layerPrefix(i) + "mlp.";
    const ValueId input = x;
    x = tensorParallel("TensorParallelCopy", x, "tp_copy");
    ValueId a = linear("w1", x, H_, F_, param(p + "w1.weight"), optionalParam(p + "w1.bias"));
    a = withLora(p + "w1", "w1", a, input, H_, F_, false);
    ValueId g = linear("w2", x, H_, F_, param(p + "w2.weight"), optionalParam(p + "w2.bias"));
    g = withLora(p + "w2", "w2", g, input, H_, F_, false);
    ValueId m = b_.create("Mul", "mul", {a, b_.create("Silu", "act", {g})});
    ValueId y = rowParallelLinear("c_proj", m, F_, H_, param(p + "c_proj.weight"),
                                  optionalParam(p + "c_proj.bias"));
    return withLora(p + "c_proj", "c_proj", y, m, F_, H_, true);
  }

  ValueId block(int64_t i, ValueId x) {
    const std::string p = layerPrefix(i);
    ValueId attn = attention(i, rmsNorm(x, param(p + "ln_1.weight"), "ln_1"));
    ValueId h = b_.create("Add", "attn_residual", {x, attn});
    ValueId m = mlp(i, rmsNorm(h, param(p + "ln_2.weight"), "ln_2"));
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
  ValueId vocabParallelLoss(ValueId logits, ValueId labels) {
    auto s = b_.scope("loss");
    ValueId max = b_.create("VocabParallelMax", "shard_max", {logits});
    max = b_.create("TensorParallelMax", "max", {max}, {{"ranks", int64_t{tp_}}});
    ValueId sum = b_.create("VocabParallelSumExp", "shard_sum_exp", {logits, max});
    sum = tensorParallel("TensorParallelReduce", sum, "sum_exp");
    ValueId part = b_.create("VocabParallelCrossEntropy", "shard_loss",
                             {logits, labels, tp_rank_, max, sum}, {{"ranks", int64_t{tp_}}});
    return tensorParallel("TensorParallelReduce", part, "loss");
  }

  ops::OpBuilder b_;
  const QwenConfig &config_;
  DType dt_;
  int64_t B_, S_, H_;
  int64_t tp_;    // tensor-parallel ranks
  int64_t heads_; // this rank's attention heads
  int64_t hd_;    // channels per head
  int64_t A_;     // this rank's attention width: heads_ * hd_
  int64_t F_;     // this rank's MLP width
  int64_t V_;     // this rank's vocabulary rows
  int64_t rot_;
  double lora_scale_;       // alpha / r
  double lora_dropout_ = 0; // its probability, with dropout_seed_
  ValueId dropout_seed_ = kNoValue;
  ValueId tp_rank_ = kNoValue; // with tp_ > 1
  int64_t lora_sites_ = 0;     // adapted linears so far: each one's dropout stream
  std::unordered_map<std::string, ValueId> params_;
  ValueId cos_ = kNoValue, sin_ = kNoValue;
};

} // namespace

std::vector<ParamSpec> qwenParameters(const QwenConfig &config) {
  const int64_t H = config.hidden_size, F = config.mlpWidth(), V = config.vocab_size;
  const bool bias = !config.no_bias;
  const TensorSplit replicated, rows{0}, columns{1}, qkv_rows{0, 3};
  std::vector<ParamSpec> params;
  params.push_back({"transformer.wte.weight", {V, H}, ParamKind::Embedding, rows});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string p = layerPrefix(i);
    params.push_back({p + "ln_1.weight", {H}, ParamKind::Norm, replicated});
    params.push_back({p + "attn.c_attn.weight", {3 * H, H}, ParamKind::Weight, qkv_rows});
    params.push_back({p + "attn.c_attn.bias", {3 * H}, ParamKind::Bias, qkv_rows});
    params.push_back({p + "attn.c_proj.weight", {H, H}, ParamKind::Weight, columns});
    if (bias)
      params.push_back({p + "attn.c_proj.bias", {H}, ParamKind::Bias, replicated});
    params.push_back({p + "ln_2.weight", {H}, ParamKind::Norm, replicated});
    for (const char *w : {"w1", "w2"}) {
      params.push_back({p + "mlp." + w + ".weight", {F, H}, ParamKind::Weight, rows});
      if (bias)
        params.push_back({p + "mlp." + w + ".bias", {F}, ParamKind::Bias, rows});
    }
    params.push_back({p + "mlp.c_proj.weight", {H, F}, ParamKind::Weight, columns});
    if (bias)
      params.push_back({p + "mlp.c_proj.bias", {H}, ParamKind::Bias, replicated});
  }
  params.push_back({"transformer.ln_f.weight", {H}, ParamKind::Norm, replicated});
  if (!config.tie_word_embeddings)
    params.push_back({"lm_head.weight", {V, H}, ParamKind::Weight, rows});
  return params;
}

Expected<std::vector<ParamSpec>> loraParameters(const QwenConfig &config, const LoraConfig &lora) {
  KILN_RETURN_IF_ERROR(validateLoraConfig(lora, "LoRA"));
  const int64_t H = config.hidden_size, F = config.mlpWidth(), r = lora.rank;
  const TensorSplit replicated, rows{0}, columns{1}, qkv_rows{0, 3};
  struct Linear {
    const char *module; // under transformer.h.<i>.
    int64_t out, in;
    TensorSplit split; // the base weight's
  };
  const Linear linears[] = {{"attn.c_attn", 3 * H, H, qkv_rows},
                            {"attn.c_proj", H, H, columns},
                            {"mlp.w1", F, H, rows},
                            {"mlp.w2", F, H, rows},
                            {"mlp.c_proj", H, F, columns}};
  for (const std::string &t : lora.targets) {
    LoraConfig one = lora;
    one.targets = {t};
    bool found = false;
    for (int64_t i = 0; i < config.num_hidden_layers && !found; ++i)
      for (const Linear &l : linears)
        found = found || isLoraTarget(one, layerPrefix(i) + l.module);
    if (!found)
      return Error("LoRA target '" + t +
                   "' matches no linear layer of the model; Qwen's are attn.c_attn, "
                   "attn.c_proj, mlp.w1, mlp.w2 and mlp.c_proj (lm_head takes no adapter)");
  }
  std::vector<ParamSpec> params;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i)
    for (const Linear &l : linears) {
      const std::string module = layerPrefix(i) + l.module;
      if (!isLoraTarget(lora, module))
        continue;
      const bool row_parallel = l.split == columns;
      params.push_back(
          {loraAName(module), {r, l.in}, ParamKind::LoraA, row_parallel ? columns : replicated});
      params.push_back(
          {loraBName(module), {l.out, r}, ParamKind::LoraB, row_parallel ? replicated : l.split});
    }
  return params;
}

Expected<Graph> buildQwenForward(const QwenConfig &config, const ModelOptions &options) {
  KILN_RETURN_IF_ERROR(validateQwenConfig(config, "Qwen config"));
  if (!isFloat(options.dtype))
    return Error("Qwen forward: dtype " + std::string(dtypeName(options.dtype)) +
                 ": expected f32, f16 or bf16");
  const int64_t seq = options.seq == 0 ? config.seq_length : options.seq;
  if (seq < 2 || seq > config.max_position_embeddings)
    return Error("Qwen forward: sequence length " + std::to_string(seq) +
                 ": expected at least 2 (the loss predicts each next token) and at most "
                 "max_position_embeddings (" +
                 std::to_string(config.max_position_embeddings) + ")");
  if (options.batch < 1 || options.batch > kMaxTokens / seq)
    return Error("Qwen forward: batch " + std::to_string(options.batch) +
                 ": expected at least 1 and batch * sequence length at most " +
                 std::to_string(kMaxTokens));

  const int tp = options.tensor_parallel;
  if (tp < 1 || config.num_attention_heads % tp != 0 || config.mlpWidth() % tp != 0 ||
      config.vocab_size % tp != 0)
    return Error("Qwen forward: tensor parallelism over " + std::to_string(tp) +
                 " ranks: it must divide num_attention_heads (" +
                 std::to_string(config.num_attention_heads) + "), the MLP width (" +
                 std::to_string(config.mlpWidth()) + ", intermediate_size / 2) and vocab_size (" +
                 std::to_string(config.vocab_size) + ")");

  Graph graph("qwen");
  const Shape tokens = {options.batch, seq};
  ValueId input_ids = graph.addInput("input_ids", {DType::I64, tokens}, InputRole::Data);
  ValueId labels = graph.addInput("labels", {DType::I64, tokens}, InputRole::Data);
  std::unordered_map<std::string, ValueId> params;
  const bool lora = options.lora.enabled();
  for (ParamSpec &p : qwenParameters(config)) {
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
