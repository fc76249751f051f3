// Runs a job's passes over a graph, in registry order, and records what each
// did. After every pass the graph is compacted and verified, so a broken
// rewrite is reported against the pass that made it.
#pragma once

#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_registry.h"
#include "passes/setting_match.h"
#include "support/error.h"

namespace kiln::passes {

// What to print or measure around passes (MLIR's -mlir-print-ir-after,
// -mlir-timing, -mlir-pass-statistics).
struct Instrumentation {
  // Pass names, or "all"; print_after also takes "changed" (after the passes
  // that changed the graph).
  std::set<std::string> print_before;
  std::set<std::string> print_after;
  bool timing = false;         // a timing table after the pipeline
  bool statistics = false;     // per-pass counters after the pipeline
  std::ostream *out = nullptr; // where dumps and tables go (stderr when null)
};

struct PassRecord {
  std::string name;
  PassGroup group = PassGroup::Cleanup;
  bool enabled = false;
  std::string decided_by;     // the switch layer that decided `enabled`
  std::string not_applicable; // why it does nothing on this target, or empty
  bool ran = false;
  PassResult result;
  double time_ms = 0;
};

struct PipelineReport {
  std::string target;
  std::vector<PassRecord> passes;
  // What each entry of the job's list-like settings matched (filled by the
  // driver, which checks them against the graph before the passes run).
  std::vector<SettingMatch> settings;

  const PassRecord *find(std::string_view name) const;
  std::string timingTable() const;
  std::string statisticsTable() const;
};

// The report in the spirit of ATC's fusion_result.json, plus the fusion
// groups of the final graph with their members. Rejections past
// `max_rejections` per pass are counted, not listed.
nlohmann::json reportToJson(const PipelineReport &report, const Graph &graph,
                            size_t max_rejections = 200);

class PassManager {
public:
  PassManager(const PassRegistry &registry, const PassContext &context,
              Instrumentation instrumentation = {});

  // Names in `instrumentation` that are neither passes nor keywords are errors.
  Status validate() const;
  // The whole pipeline, or with `only` that group's passes alone (the
  // driver runs the step rewrites on a step before cutting it in stages).
  Expected<PipelineReport> run(Graph &graph, std::optional<PassGroup> only = std::nullopt) const;

private:
  const PassRegistry &registry_;
  const PassContext &context_;
  Instrumentation instrumentation_;
};

} // namespace kiln::passes
