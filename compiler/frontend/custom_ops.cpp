#include "compiler/frontend/custom_ops.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

#include "compiler/codegen/lowering/custom_ops.h"
#include "ir/file_io.h"
#include "ops/custom/custom_op.h"
#include "ops/op_registry.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  std::string source;      // file:line of the definition
  std::string fingerprint; // what must match for a reload to be a no-op
};

struct LoadedOps {
  std::mutex mutex;
  std::map<std::string, Loaded> ops;
  std::vector<std::string> without_gradient;
};

LoadedOps &loaded() {
  static LoadedOps state;
  return state;
}

// Everything about the op that a second definition must repeat.
std::string fingerprintOf(const ops::OpDef &def) {
  std::string s = std::string(ops::opKindName(def.kind)) + "|" + def.compute + "|";
  for (const ops::OperandDef &in : def.inputs) {
    s += in.name + ":";
    for (DType d : in.dtypes)
      s += std::string(dtypeName(d)) + ",";
    s += ";";
  }
  for (const ops::OperandDef &out : def.outputs) {
    s += out.name + ":";
    for (DType d : out.dtypes)
      s += std::string(dtypeName(d)) + ",";
    s += ";";
  }
  for (const ops::AttrDef &a : def.attrs)
    s += a.name + ":" + std::string(attrKindName(a.kind)) + "=" +
         (a.default_value ? attrValueToString(*a.default_value) : "") + ";";
  return s;
}

} // namespace

Status loadCustomOps(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(dir + ": custom ops folder does not exist (expected a folder of *.xml op "
                       "definitions)");
  std::vector<fs::path> files;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".xml")
      files.push_back(e.path());
  if (ec)
    return Error(dir + ": cannot list the custom ops folder: " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty())
    spdlog::warn("{}: no *.xml custom op definitions in the folder", dir);

  // Every file is read and checked before anything is registered.
  std::vector<ops::custom::CustomOpSet> sets;
  std::map<std::string, std::string> seen; // op -> source, within this folder
  for (const fs::path &file : files) {
    KILN_ASSIGN_OR_RETURN(std::string xml, readFile(file.string()));
    KILN_ASSIGN_OR_RETURN(std::vector<ops::custom::CustomOpSpec> specs,
                          ops::custom::parseCustomOpFile(xml, file.string()));
    for (const ops::custom::CustomOpSpec &spec : specs) {
      KILN_ASSIGN_OR_RETURN(ops::custom::CustomOpSet set, ops::custom::buildCustomOps(spec));
      for (const ops::custom::BuiltOp &op : set.ops) {
        auto [it, fresh] = seen.emplace(op.def.name, op.def.source);
        if (!fresh)
          return Error(op.def.source + ": op " + op.def.name + " is defined twice (also at " +
                       it->second + ")");
      }
      sets.push_back(std::move(set));
    }
  }

  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  ops::OpRegistry &registry = ops::OpRegistry::global();
  std::vector<const ops::custom::BuiltOp *> fresh;
  for (const ops::custom::CustomOpSet &set : sets) {
    for (const ops::custom::BuiltOp &op : set.ops) {
      if (!registry.find(op.def.name)) {
        fresh.push_back(&op);
        continue;
      }
      auto it = state.ops.find(op.def.name);
      if (it == state.ops.end())
        return Error(op.def.source + ": op " + op.def.name +
                     " is the name of a built-in op (kiln ops lists them): rename the custom op");
      if (it->second.fingerprint != fingerprintOf(op.def))
        return Error(op.def.source + ": op " + op.def.name + " is defined already, differently, " +
                     "at " + it->second.source + ": rename one of them");
    }
  }
  for (const ops::custom::BuiltOp *op : fresh) {
    KILN_RETURN_IF_ERROR(registry.add(op->def, op->impl));
    KILN_RETURN_IF_ERROR(codegen::registerCustomOpLowering(op->def.name, op->program));
    state.ops[op->def.name] = Loaded{op->def.source, fingerprintOf(op->def)};
  }
  for (const ops::custom::CustomOpSet &set : sets) {
    if (set.no_gradient.empty())
      continue;
    const std::string &name = set.ops.front().def.name;
    const std::string line = name + ": " + set.no_gradient;
    if (std::find(state.without_gradient.begin(), state.without_gradient.end(), line) ==
        state.without_gradient.end()) {
      state.without_gradient.push_back(line);
      spdlog::debug("custom op {} has no gradient rule: {}", name, set.no_gradient);
    }
  }
  return Status::ok();
}

std::vector<std::string> loadedCustomOps() {
  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  std::vector<std::string> names;
  for (const auto &[name, op] : state.ops)
    names.push_back(name);
  return names;
}

std::vector<std::string> customOpsWithoutGradient() {
  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.without_gradient;
}

} // namespace kiln::frontend
