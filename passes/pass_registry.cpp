#include "passes/pass_registry.h"

#include <algorithm>
#include <cassert>
#include <tuple>

#include "passes/pipeline.h"
#include "support/name_suggest.h"

namespace kiln::passes {

std::string_view passGroupName(PassGroup group) {
  switch (group) {
  case PassGroup::Cleanup:
    return "Cleanup";
  case PassGroup::Precision:
    return "Precision";
  case PassGroup::StepRewrite:
    return "StepRewrite";
  case PassGroup::GraphFusion:
    return "GraphFusion";
  case PassGroup::UBFusion:
    return "UBFusion";
  }
  return "?";
}

std::optional<PassGroup> parsePassGroup(std::string_view name) {
  for (PassGroup g : kAllPassGroups)
    if (passGroupName(g) == name)
      return g;
  return std::nullopt;
}

namespace {

PassRegistry &mutableBuiltin() {
  static PassRegistry registry;
  return registry;
}

} // namespace

bool registerBuiltinPass(std::shared_ptr<const Pass> pass) {
  Status s = mutableBuiltin().add(std::move(pass));
  assert(s.isOk() && "two built-in passes share a name");
  return s.isOk();
}

const PassRegistry &PassRegistry::builtin() { return mutableBuiltin(); }

Status PassRegistry::add(std::shared_ptr<const Pass> pass) {
  if (find(pass->info().name))
    return Error("pass '" + pass->info().name + "' is defined twice");
  passes_.push_back(std::move(pass));
  return Status::ok();
}

const Pass *PassRegistry::find(std::string_view name) const {
  for (const auto &p : passes_)
    if (p->info().name == name)
      return p.get();
  return nullptr;
}

std::vector<const Pass *> PassRegistry::ordered() const {
  std::vector<const Pass *> out;
  for (const auto &p : passes_)
    out.push_back(p.get());
  std::sort(out.begin(), out.end(), [](const Pass *a, const Pass *b) {
    const PassInfo &x = a->info(), &y = b->info();
    const int px = pipelinePriority(x), py = pipelinePriority(y);
    return std::tie(x.group, px, x.name) < std::tie(y.group, py, y.name);
  });
  return out;
}

std::vector<std::string> PassRegistry::nearestNames(std::string_view name, size_t count) const {
  std::vector<std::string> names;
  for (const auto &p : passes_)
    names.push_back(p->info().name);
  return kiln::nearestNames(name, names, count);
}

std::string PassRegistry::unknownPassMessage(std::string_view name) const {
  std::string msg = "unknown pass '" + std::string(name) + "'";
  std::vector<std::string> near = nearestNames(name);
  if (near.empty())
    return msg + " (see 'kiln passes list')";
  msg += " (did you mean ";
  for (size_t i = 0; i < near.size(); ++i)
    msg += (i ? ", " : "") + near[i];
  return msg + "?)";
}

} // namespace kiln::passes
