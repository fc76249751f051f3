#include "passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ir/printer.h"
#include "ops/op_verifier.h"

namespace kiln::passes {

using nlohmann::json;

const PassRecord *PipelineReport::find(std::string_view name) const {
  for (const PassRecord &r : passes)
    if (r.name == name)
      return &r;
  return nullptr;
}

std::string PipelineReport::timingTable() const {
  double total = 0;
  for (const PassRecord &r : passes)
    total += r.time_ms;
  std::ostringstream os;
  os << "===-------------------------------------------------------------------------===\n"
     << "                         kiln pass execution timing report\n"
     << "===-------------------------------------------------------------------------===\n";
  char line[160];
  std::snprintf(line, sizeof line, "  Total: %.3f ms\n\n   %10s  %6s  %s\n", total, "ms", "%",
                "pass");
  os << line;
  for (const PassRecord &r : passes) {
    if (!r.ran)
      continue;
    std::snprintf(line, sizeof line, "   %10.3f  %5.1f%%  %s\n", r.time_ms,
                  total > 0 ? 100.0 * r.time_ms / total : 0.0, r.name.c_str());
    os << line;
  }
  return os.str();
}

std::string PipelineReport::statisticsTable() const {
  std::ostringstream os;
  os << "===-------------------------------------------------------------------------===\n"
     << "                         kiln pass statistics report\n"
     << "===-------------------------------------------------------------------------===\n";
  for (const PassRecord &r : passes) {
    if (!r.ran)
      continue;
    os << r.name << "\n";
    os << "  (S) " << r.result.match_times << " match_times\n";
    os << "  (S) " << r.result.effect_times << " effect_times\n";
    os << "  (S) " << r.result.rejections.size() << " not fused\n";
    for (const auto &[key, value] : r.result.statistics)
      os << "  (S) " << value << " " << key << "\n";
  }
  return os.str();
}

json reportToJson(const PipelineReport &report, const Graph &graph, size_t max_rejections) {
  json j;
  j["format"] = "kiln.pass-report";
  j["version"] = 1;
  j["graph"] = graph.name();
  j["target"] = report.target;
  j["passes"] = json::array();
  for (const PassRecord &r : report.passes) {
    json p;
    p["name"] = r.name;
    p["group"] = std::string(passGroupName(r.group));
    p["enabled"] = r.enabled;
    p["decided_by"] = r.decided_by;
    p["applicable"] = r.not_applicable.empty();
    if (!r.not_applicable.empty())
      p["reason"] = r.not_applicable;
    p["match_times"] = r.result.match_times;
    p["effect_times"] = r.result.effect_times;
    p["time_ms"] = r.time_ms;
    p["not_fused_count"] = r.result.rejections.size();
    p["not_fused"] = json::array();
    for (size_t i = 0; i < r.result.rejections.size() && i < max_rejections; ++i)
      p["not_fused"].push_back(
          json{{"node", r.result.rejections[i].node}, {"reason", r.result.rejections[i].reason}});
    p["statistics"] = r.result.statistics;
    if (!r.result.dtype_decisions.empty()) {
      p["dtype_decisions_count"] = r.result.dtype_decisions.size();
      p["dtype_decisions"] = json::array();
      for (size_t i = 0; i < r.result.dtype_decisions.size() && i < max_rejections; ++i) {
        const DTypeDecision &d = r.result.dtype_decisions[i];
        p["dtype_decisions"].push_back(json{{"node", d.node},
                                            {"from", std::string(dtypeName(d.from))},
                                            {"to", std::string(dtypeName(d.to))},
                                            {"why", d.why}});
      }
    }
    j["passes"].push_back(std::move(p));
  }
  j["settings"] = json::array();
  for (const SettingMatch &m : report.settings) {
    json s = {{"setting", m.setting}, {"source", m.source}, {"entry", m.entry}, {"nodes", m.nodes}};
    if (!m.op_types.empty())
      s["op_types"] = m.op_types;
    j["settings"].push_back(std::move(s));
  }
  std::vector<std::vector<NodeId>> members = graph.groupMembers();
  j["groups"] = json::array();
  for (size_t g = 0; g < graph.groups().size(); ++g) {
    const FusionGroup &group = graph.groups()[g];
    json names = json::array();
    for (NodeId id : members[g])
      names.push_back(graph.node(id).name);
    j["groups"].push_back(json{{"name", group.name},
                               {"kernel", group.kernel},
                               {"formed_by", group.formed_by},
                               {"intermediates", intermediatesName(group.intermediates)},
                               {"members", std::move(names)}});
  }
  return j;
}

PassManager::PassManager(const PassRegistry &registry, const PassContext &context,
                         Instrumentation instrumentation)
    : registry_(registry), context_(context), instrumentation_(std::move(instrumentation)) {}

Status PassManager::validate() const {
  auto check = [&](const std::set<std::string> &names, const char *flag, bool allow_changed) {
    for (const std::string &n : names) {
      if (n == "all" || (allow_changed && n == "changed") || registry_.find(n))
        continue;
      return Status(Error(std::string(flag) + ": " + registry_.unknownPassMessage(n)));
    }
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(check(instrumentation_.print_before, "--print-ir-before", false));
  return check(instrumentation_.print_after, "--print-ir-after", true);
}

Expected<PipelineReport> PassManager::run(Graph &graph, std::optional<PassGroup> only) const {
  KILN_RETURN_IF_ERROR(validate());
  std::ostream &out = instrumentation_.out ? *instrumentation_.out : std::cerr;
  auto dump = [&](const char *when, const std::string &pass) {
    out << "// -----// IR Dump " << when << " " << pass << " //----- //\n";
    printGraph(graph, out);
  };
  auto wants = [](const std::set<std::string> &set, const std::string &name) {
    return set.count("all") || set.count(name);
  };

  PipelineReport report;
  report.target = context_.target().name;
  for (const Pass *pass : registry_.ordered()) {
    const PassInfo &info = pass->info();
    if (only && info.group != *only)
      continue;
    PassRecord record;
    record.name = info.name;
    record.group = info.group;
    const PassDecision decision = context_.decide(*pass);
    record.enabled = decision.enabled;
    record.decided_by = decision.decided_by;
    record.not_applicable = decision.not_applicable;
    // A pass that cannot apply to the target is reported, not run.
    if (decision.runs()) {
      if (wants(instrumentation_.print_before, info.name))
        dump("Before", info.name);
      auto start = std::chrono::steady_clock::now();
      Expected<PassResult> result = pass->run(graph, context_);
      if (!result)
        return result.error().withContext("pass '" + info.name + "'");
      record.result = std::move(*result);
      if (Status s = graph.compact(); !s)
        return s.error().withContext("pass '" + info.name + "' left an invalid graph");
      record.time_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      record.ran = true;
      if (Status s = ops::verifyGraph(graph); !s)
        return s.error().withContext("pass '" + info.name + "' left an invalid graph");
      spdlog::debug("pass {}: match_times {}, effect_times {}, {:.3f} ms", info.name,
                    record.result.match_times, record.result.effect_times, record.time_ms);
      if (wants(instrumentation_.print_after, info.name) ||
          (instrumentation_.print_after.count("changed") && record.result.changed()))
        dump("After", info.name);
    }
    report.passes.push_back(std::move(record));
  }
  if (instrumentation_.timing)
    out << report.timingTable();
  if (instrumentation_.statistics)
    out << report.statisticsTable();
  return report;
}

} // namespace kiln::passes
