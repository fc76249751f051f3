#include "debug/bisect.h"

#include <set>

namespace kiln::debug {
std::vector<std::string> groupsFormedBy(const Graph &graph, const std::string &pass) {
  std::vector<std::string> names;
  for (const FusionGroup &g : graph.groups())
    if (g.formed_by == pass)
      names.push_back(g.name);
  return names;
}

Status keepFirstGroups(Graph &graph, const std::string &pass, int64_t keep) {
  std::set<GroupId> dropped;
  int64_t seen = 0;
  for (GroupId id = 0; id < static_cast<GroupId>(graph.groups().size()); ++id)
    if (graph.group(id).formed_by == pass && seen++ >= keep)
      dropped.insert(id);
  for (size_t n = 0; n < graph.numNodes(); ++n) {
    Node &node = graph.node(static_cast<NodeId>(n));
    if (dropped.count(node.group))
      node.group = kNoGroup;
  }
  return graph.compact();
}

Expected<BisectResult>
bisect(const std::vector<BisectCandidate> &candidates, const BisectPredicate &fails,
       const std::function<std::string(const std::string &, int64_t)> &group_of_application) {
  BisectResult r;
  auto describe = [&](const BisectTrial &t) {
    const size_t on = candidates.size() - t.disabled.size();
    std::string s = t.disabled.empty() ? "the job as given"
                    : on == 0
                        ? "every switchable pass off"
                        : "passes through " + candidates[on - 1].name + " on (" +
                              std::to_string(on) + " of " + std::to_string(candidates.size()) + ")";
    if (!t.limited_pass.empty())
      s +=
          ", " + t.limited_pass + " keeping its first " + std::to_string(t.keep_groups) + " groups";
    return s;
  };
  auto trial = [&](const BisectTrial &t) -> Expected<bool> {
    KILN_ASSIGN_OR_RETURN(bool failed, fails(t));
    ++r.trials;
    r.log.push_back(describe(t) + ": " + (failed ? "fails" : "passes"));
    return failed;
  };
  // The job with passes [k, n) off.
  auto prefix = [&](size_t k) {
    BisectTrial t;
    for (size_t i = k; i < candidates.size(); ++i)
      t.disabled.push_back(candidates[i].name);
    return t;
  };

  KILN_ASSIGN_OR_RETURN(r.job_fails, trial(BisectTrial{}));
  if (!r.job_fails)
    return r;
  KILN_ASSIGN_OR_RETURN(r.fails_without_passes, trial(prefix(0)));
  if (r.fails_without_passes)
    return r;

  // By group: which group's passes, switched off alone, make it pass.
  std::vector<passes::PassGroup> order;
  for (const BisectCandidate &c : candidates)
    if (std::find(order.begin(), order.end(), c.group) == order.end())
      order.push_back(c.group);
  for (passes::PassGroup g : order) {
    BisectTrial t;
    for (const BisectCandidate &c : candidates)
      if (c.group == g)
        t.disabled.push_back(c.name);
    KILN_ASSIGN_OR_RETURN(bool failed, trial(t));
    r.log.back() = std::string(passes::passGroupName(g)) + " off: " + (failed ? "fails" : "passes");
  }

  // By pass: the shortest failing prefix of the pipeline; its last pass is the culprit.
  size_t lo = 0, hi = candidates.size(); // prefix(lo) passes, prefix(hi) fails
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    KILN_ASSIGN_OR_RETURN(bool failed, trial(prefix(mid)));
    (failed ? hi : lo) = mid;
  }
  const BisectCandidate &culprit = candidates[hi - 1];
  r.culprit = culprit.name;
  r.culprit_group = std::string(passes::passGroupName(culprit.group));
  r.applications = culprit.groups_formed;
  if (culprit.groups_formed == 0)
    return r;

  // By application: the fewest of its groups (in graph order) that still
  // fail. Keeping none is the previous prefix, which passed.
  BisectTrial limited = prefix(hi);
  limited.limited_pass = culprit.name;
  int64_t keep_lo = 0, keep_hi = culprit.groups_formed; // keep_lo passes, keep_hi fails
  while (keep_hi - keep_lo > 1) {
    limited.keep_groups = (keep_lo + keep_hi) / 2;
    KILN_ASSIGN_OR_RETURN(bool failed, trial(limited));
    (failed ? keep_hi : keep_lo) = limited.keep_groups;
  }
  r.application = keep_hi;
  r.group_name = group_of_application(culprit.name, keep_hi);
  return r;
}

std::string BisectResult::disableFlag() const { return "--disable-pass " + culprit; }

std::string BisectResult::switchSnippet() const {
  return "{\"Switch\": {\"" + culprit_group + "\": {\"" + culprit + "\": \"off\"}}}";
}

std::string BisectResult::toText() const {
  std::string s;
  if (!reference.empty())
    s += "reference: " + reference + "\n";
  for (const std::string &line : log)
    s += "  trial: " + line + "\n";
  if (!job_fails)
    return s + "the job does not fail: nothing to bisect\n";
  if (fails_without_passes)
    return s + "the job fails with every switchable pass off: no pass causes it\n" +
           (next_step.empty() ? "" : next_step + "\n");
  s += "culprit: " + culprit + " (" + culprit_group + ")";
  if (application > 0)
    s += ", application " + std::to_string(application) + " of " + std::to_string(applications) +
         ": group '" + group_name + "'";
  s += "\navoid it for this job: " + disableFlag() +
       "\nor in a fusion switch file: " + switchSnippet() + "\n";
  return s;
}

nlohmann::json BisectResult::toJson() const {
  nlohmann::json j = {{"job_fails", job_fails},
                      {"fails_without_passes", fails_without_passes},
                      {"trials", trials},
                      {"log", log}};
  if (!reference.empty())
    j["reference"] = reference;
  if (fails_without_passes && !next_step.empty())
    j["next_step"] = next_step;
  if (!culprit.empty()) {
    j["culprit"] = culprit;
    j["group"] = culprit_group;
    j["application"] = application;
    j["applications"] = applications;
    if (!group_name.empty())
      j["fused_group"] = group_name;
    j["flag"] = disableFlag();
    j["switch_file"] = nlohmann::json::parse(switchSnippet());
  }
  return j;
}

} // namespace kiln::debug
