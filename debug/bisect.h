// Narrowing a failure down to the pass that causes it, LLVM opt-bisect style:
// first by pass group, then by pass (the shortest prefix of the pipeline that
// still fails), then — for a fusion pass or rule — by the N-th group it
// formed. The failure itself is a predicate the caller supplies (a compile
// error, an accuracy regression), run once per trial.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "passes/pass.h"

namespace kiln::debug {

// One trial: the job with `disabled` passes switched off and, when set, only
// the first `keep_groups` groups formed by `limited_pass` kept.
struct BisectTrial {
  std::vector<std::string> disabled;
  std::string limited_pass;
  int64_t keep_groups = -1;
};

// True when the trial fails; an error aborts the bisection.
using BisectPredicate = std::function<Expected<bool>(const BisectTrial &trial)>;

struct BisectCandidate {
  std::string name;
  passes::PassGroup group;
  int64_t groups_formed = 0; // fusion groups the pass formed in the full job
};

struct BisectResult {
  bool job_fails = false;
  bool fails_without_passes = false; // with every candidate off: not a pass's doing
  std::vector<std::string> log;      // one line per trial
  std::string culprit;               // the pass or rule
  std::string culprit_group;         // GraphFusion, UBFusion, ...
  int64_t application = 0;           // 1-based in graph order, 0 when not narrowed further
  int64_t applications = 0;          // groups the culprit formed
  std::string group_name;            // the fused group of that application
  int trials = 0;
  std::string reference; // --check accuracy: what the outputs were compared with
  // When no pass causes it: where to look instead ("kiln debug overflow
  // ..." when the job's own outputs are not finite). Empty: nothing to add.
  std::string next_step;

  // How to avoid it for one job: the flag and a CANN switch-file snippet.
  std::string disableFlag() const;
  std::string switchSnippet() const;
  std::string toText() const;
  nlohmann::json toJson() const;
};

// `candidates` in run order: the enabled passes the job may switch off.
// `group_of_application(pass, n)` names the n-th group `pass` formed (for the report).
Expected<BisectResult>
bisect(const std::vector<BisectCandidate> &candidates, const BisectPredicate &fails,
       const std::function<std::string(const std::string &, int64_t)> &group_of_application);

// Ungroups every group `pass` formed after its first `keep` (in graph order)
// and compacts the graph: the job as if the pass had stopped there. (An
// emulation: a real limit could let a later pass fuse those nodes.)
Status keepFirstGroups(Graph &graph, const std::string &pass, int64_t keep);

// The names of the groups `pass` formed, in graph order.
std::vector<std::string> groupsFormedBy(const Graph &graph, const std::string &pass);

} // namespace kiln::debug
