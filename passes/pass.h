// A pass: one named, switchable rewrite of the graph.
//
// Each pass declares what it is (PassInfo) and reports what it did
// (PassResult): how many candidates matched its pattern and how many it
// rewrote (ATC's match_times / effect_times), and for every candidate it did
// not rewrite, why (XLA's FusionDecision, Inductor's WhyNoFuse).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/pass_options.h"
#include "passes/verdict.h"
#include "support/error.h"

namespace kiln::passes {

class PassContext;

// Groups run in this order (pipeline.cpp); CANN's switch files name
// GraphFusion and UBFusion. StepRewrite holds the rewrites of the step a job
// asks for by their own flag (--recompute): their flag decides, so no "ALL"
// of a switch file turns them off.
enum class PassGroup : uint8_t { Cleanup, Precision, StepRewrite, GraphFusion, UBFusion };
inline constexpr PassGroup kAllPassGroups[] = {PassGroup::Cleanup, PassGroup::Precision,
                                               PassGroup::StepRewrite, PassGroup::GraphFusion,
                                               PassGroup::UBFusion};

std::string_view passGroupName(PassGroup group);
std::optional<PassGroup> parsePassGroup(std::string_view name);

struct PassInfo {
  std::string name; // CANN's name where CANN has the pass: "TbeMatmulFixPipeFusionPass"
  PassGroup group = PassGroup::Cleanup;
  // A fusion rule file's place within its group, lower first (CANN's priority
  // numbers); a built-in pass's is in pipeline.cpp (pipelinePriority).
  int priority = 0;
  bool default_on = true;
  bool may_disable = true;
  std::string required_because;        // why it may not be disabled
  std::string summary;                 // one line
  std::string description;             // what it matches, what it produces, its conditions
  std::vector<PassOptionInfo> options; // what a job may set (pass_options.h)
};

// A candidate the pass looked at and left alone.
struct Rejection {
  std::string node;   // the candidate's anchor node
  std::string reason; // which op, which condition
};

// A value whose dtype a precision pass changed, for the compile report.
struct DTypeDecision {
  std::string node;
  DType from = DType::F32;
  DType to = DType::F32;
  std::string why; // "white list", "black list", "keep_dtype", "attention fp32", ...
};

struct PassResult {
  int64_t match_times = 0;  // candidates that matched the pattern
  int64_t effect_times = 0; // rewrites made (nodes removed, groups formed, ...)
  std::vector<Rejection> rejections;
  std::map<std::string, int64_t> statistics; // pass-specific counters
  std::vector<DTypeDecision> dtype_decisions;

  bool changed() const { return effect_times > 0; }
  void reject(const Node &node, std::string reason) {
    rejections.push_back({node.name, std::move(reason)});
  }
  void reject(const Node &node, const Verdict &verdict) { reject(node, verdict.reason()); }
};

class Pass {
public:
  virtual ~Pass() = default;
  virtual const PassInfo &info() const = 0;
  // Whether the pass can do anything for the job; when not, why (e.g.
  // "ascend910 has no FixPipe"). A pass that does not apply still appears
  // in the report, with effect_times 0 and this reason.
  virtual Verdict appliesTo(const PassContext &ctx) const { return Verdict::allow(); }
  // Rewrites `graph` in place. The graph may be left with erased nodes and
  // out-of-order appended nodes: the pass manager compacts and verifies it.
  virtual Expected<PassResult> run(Graph &graph, const PassContext &ctx) const = 0;
};

} // namespace kiln::passes
