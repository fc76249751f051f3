#include "compiler/driver/job_json.h"

#include "passes/precision/precision_mode.h"

namespace kiln::driver {

using nlohmann::json;

json jobToJson(const ResolvedJob &job) {
  const passes::PassContext &ctx = *job.context;
  const passes::PrecisionSettings &precision = ctx.precision();
  const passes::RecomputeSettings recompute = passes::recomputeSettings(ctx);
  json passes = json::array();
  for (const passes::Pass *p : job.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    const passes::PassDecision decision = ctx.decide(*p);
    json entry{{"name", info.name},
               {"group", std::string(passes::passGroupName(info.group))},
               {"enabled", decision.enabled},
               {"default", info.default_on},
               {"decided_by", decision.decided_by},
               {"applicable", decision.not_applicable.empty()}};
    passes.push_back(std::move(entry));
  }
  json white = json::array(), black = json::array();
  for (const auto &[op, list] : precision.mixlist.entries()) {
    if (list == passes::PrecisionList::White)
      white.push_back(op);
    else if (list == passes::PrecisionList::Black)
      black.push_back(op);
  }
  return {
      {"target", job.target.name},
      {"dtype", std::string(dtypeName(job.dtype))},
      {"overflow_mode", std::string(overflowModeName(job.overflow))},
      {"precision_mode", std::string(passes::precisionModeName(precision.mode))},
      {"attention_fp32_layers", ctx.options(passes::kAttentionFp32CastPassName).getInts("layers")},
      {"recompute",
       {{"mode", std::string(passes::recomputeModeName(recompute.mode))},
        {"layers", recompute.layers}}},
      {"keep_dtype",
       {{"node_names", precision.keep_dtype.node_names},
        {"op_types", precision.keep_dtype.op_types}}},
      {"mixlist", {{"white", white}, {"black", black}}},
      {"passes", std::move(passes)},
      {"warnings", job.warnings}};
}

artifact::Manifest makeManifest(const ResolvedJob &job, const codegen::ObjectOptions &codegen,
                                artifact::ModelInfo model) {
  return artifact::makeManifest(job.target, job.dtype, job.overflow, jobToJson(job), codegen,
                                std::move(model));
}

} // namespace kiln::driver
