#include "ops/op_registry.h"

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

OpRegistry &OpRegistry::global() {
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
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &[name, op] : ops_)
    out.push_back(name);
  return out;
}

Status OpRegistry::add(OpDef def, OpImpl impl) {
  if (ops_.count(def.name))
    return Error(def.source + ": op " + def.name + " already exists");
  std::string name = def.name;
  ops_[name] = RegisteredOp{std::move(def), std::move(impl)};
  return Status::ok();
}

} // namespace kiln::ops
