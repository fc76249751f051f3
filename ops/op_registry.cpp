#include "ops/op_registry.h"

#include <algorithm>

#include "ops/embedded_defs.h"

namespace kiln::ops {
namespace {

std::map<std::string, OpImpl> &pendingImpls() {
  static std::map<std::string, OpImpl> impls;
  return impls;
}

} // namespace

bool registerOpImpl(const char *name, OpImpl impl) {
  pendingImpls()[name] = std::move(impl);
  return true;
}

const OpRegistry &OpRegistry::builtin() {
  static OpRegistry *registry = [] {
    auto *r = new OpRegistry();
    std::map<std::string, OpImpl> impls = pendingImpls();
    for (const EmbeddedFile &file : embeddedOpDefFiles()) {
      auto defs = parseOpDefs(file.contents, file.path);
      if (!defs) {
        r->consistency_errors_.push_back(defs.message());
        continue;
      }
      for (OpDef &def : *defs) {
        auto it = impls.find(def.name);
        if (it == impls.end()) {
          r->consistency_errors_.push_back(def.source + ": op " + def.name +
                                           " has no registered implementation");
          continue;
        }
        std::string name = def.name;
        if (r->ops_.count(name))
          r->consistency_errors_.push_back(def.source + ": op " + name + " is defined twice");
        r->ops_[name] = RegisteredOp{std::move(def), std::move(it->second)};
        impls.erase(it);
      }
    }
    for (const auto &[name, impl] : impls)
      r->consistency_errors_.push_back("op " + name + " is implemented but has no XML definition");
    return r;
  }();
  return *registry;
}

const RegisteredOp *OpRegistry::find(std::string_view name) const {
  if (auto it = ops_.find(name); it != ops_.end())
    return &it->second;
  return base_ ? base_->find(name) : nullptr;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out = base_ ? base_->names() : std::vector<std::string>{};
  std::vector<std::string> own = ownNames();
  out.insert(out.end(), own.begin(), own.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> OpRegistry::ownNames() const {
  std::vector<std::string> out;
  for (const auto &[name, op] : ops_)
    out.push_back(name);
  return out;
}

Status OpRegistry::add(RegisteredOp op) {
  if (find(op.def.name))
    return Error(op.def.source + ": op " + op.def.name + " already exists");
  std::string name = op.def.name;
  ops_.emplace(std::move(name), std::move(op));
  return Status::ok();
}

const OpRegistry &opsOf(const Graph &graph) {
  // OpRegistry is OpVocabulary's one implementation (it is final).
  const OpVocabulary *v = graph.vocabulary().get();
  return v ? static_cast<const OpRegistry &>(*v) : OpRegistry::builtin();
}

} // namespace kiln::ops
