#include "compiler/driver/pass_listing.h"

#include <algorithm>
#include <sstream>

namespace kiln::driver {

using nlohmann::json;

namespace {

json passEntry(const passes::Pass &pass, const ResolvedJob &job) {
  const passes::PassInfo &info = pass.info();
  const passes::PassContext &ctx = *job.context;
  std::string reason = pass.notApplicableReason(ctx);
  json e{{"name", info.name},
         {"group", std::string(passes::passGroupName(info.group))},
         {"priority", info.priority},
         {"default", info.default_on ? "on" : "off"},
         {"may_disable", info.may_disable},
         {"enabled", ctx.isEnabled(info.name, info.default_on)},
         {"decided_by", ctx.decidedBy(info.name)},
         {"applicable", reason.empty()},
         {"summary", info.summary},
         {"description", info.description}};
  if (!info.may_disable)
    e["required_because"] = info.required_because;
  if (!reason.empty())
    e["reason"] = reason;
  return e;
}

} // namespace

json passListing(const ResolvedJob &job) {
  json list = json::array();
  for (const passes::Pass *p : job.registry->ordered())
    list.push_back(passEntry(*p, job));
  return list;
}

std::string passTable(const json &listing, const std::string &target) {
  std::vector<std::vector<std::string>> rows{
      {"PASS", "GROUP", "DEFAULT", "THIS JOB", "ON " + target, "SUMMARY"}};
  for (const json &e : listing) {
    std::string state = e["enabled"].get<bool>() ? "on" : "off";
    if (!e["may_disable"].get<bool>())
      state += " (required)";
    rows.push_back({e["name"].get<std::string>(), e["group"].get<std::string>(),
                    e["default"].get<std::string>(), state,
                    e["applicable"].get<bool>() ? "applies" : "does not apply",
                    e["summary"].get<std::string>()});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  std::ostringstream os;
  for (const auto &row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      os << row[c];
      if (c + 1 < row.size())
        os << std::string(width[c] - row[c].size() + 2, ' ');
    }
    os << "\n";
  }
  return os.str();
}

Expected<std::string> describePass(const ResolvedJob &job, const std::string &name) {
  const passes::Pass *pass = job.registry->find(name);
  if (!pass)
    return Error(job.registry->unknownPassMessage(name));
  json e = passEntry(*pass, job);
  std::ostringstream os;
  os << e["name"].get<std::string>() << "\n"
     << "  group:       " << e["group"].get<std::string>() << " (priority "
     << e["priority"].get<int>() << ")\n"
     << "  default:     " << e["default"].get<std::string>() << "\n"
     << "  may disable: "
     << (e["may_disable"].get<bool>() ? "yes" : "no, " + e["required_because"].get<std::string>())
     << "\n"
     << "  this job:    " << (e["enabled"].get<bool>() ? "on" : "off") << " ("
     << e["decided_by"].get<std::string>() << ")\n"
     << "  target:      " << job.target.name << ": "
     << (e["applicable"].get<bool>() ? "applies" : e["reason"].get<std::string>()) << "\n"
     << "  summary:     " << e["summary"].get<std::string>() << "\n\n"
     << e["description"].get<std::string>() << "\n";
  return os.str();
}

} // namespace kiln::driver
