#include "compiler/codegen/kernel_diagnostic.h"

namespace kiln::codegen {

std::string KernelDiagnostic::toString() const {
  std::string s = code + " kernel '" + kernel + "' (" + kind;
  if (!formed_by.empty())
    s += ", formed by " + formed_by;
  s += "): " + constraint + "\n  member ops:";
  for (const KernelMember &m : members)
    s += "\n    " + m.name + " (" + m.op + ")";
  if (!ir_dump.empty())
    s += "\n  kernel IR: " + ir_dump;
  return s;
}

nlohmann::json KernelDiagnostic::toJson() const {
  nlohmann::json members_json = nlohmann::json::array();
  for (const KernelMember &m : members)
    members_json.push_back({{"name", m.name}, {"op", m.op}});
  nlohmann::json j = {
      {"code", code},           {"kernel", kernel},        {"kind", kind},
      {"formed_by", formed_by}, {"members", members_json}, {"constraint", constraint}};
  if (!ir_dump.empty())
    j["ir_dump"] = ir_dump;
  return j;
}

} // namespace kiln::codegen
