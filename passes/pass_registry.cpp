#include "passes/pass_registry.h"

#include <algorithm>
#include <cassert>
#include <tuple>

namespace kiln::passes {

std::string_view passGroupName(PassGroup group) {
  switch (group) {
  case PassGroup::Cleanup:
    return "Cleanup";
  case PassGroup::Precision:
    return "Precision";
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

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
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
    return std::tie(x.group, x.priority, x.name) < std::tie(y.group, y.priority, y.name);
  });
  return out;
}

std::vector<std::string> PassRegistry::nearestNames(std::string_view name, size_t count) const {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto &p : passes_)
    scored.push_back({editDistance(name, p->info().name), p->info().name});
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  // Only suggest names that share most of their letters with the query.
  const size_t limit = std::max<size_t>(3, name.size() / 2);
  for (const auto &[distance, n] : scored)
    if (out.size() < count && distance <= limit)
      out.push_back(n);
  return out;
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
