#include "compiler/frontend/custom_ops.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "ir/file_io.h"
#include "ops/custom/custom_op.h"
#include "ops/op_registry.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  std::string source;      // file:line of the definition
  std::string fingerprint; // what must match for a reload to be a no-op
  size_t file = 0;         // index into LoadedOps::files
};

struct LoadedOps {
  std::mutex mutex;
  std::map<std::string, Loaded> ops;
  std::vector<CustomOpSource> files; // every file that registered an op
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
  std::vector<fs::path> paths;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".xml")
      paths.push_back(e.path());
  if (ec)
    return Error(dir + ": cannot list the custom ops folder: " + ec.message());
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    spdlog::warn("{}: no *.xml custom op definitions in the folder", dir);
  std::vector<CustomOpSource> files;
  for (const fs::path &path : paths) {
    KILN_ASSIGN_OR_RETURN(std::string xml, readFile(path.string()));
    files.push_back({path.string(), std::move(xml)});
  }
  return loadCustomOpSources(files);
}

Status loadCustomOpSources(const std::vector<CustomOpSource> &files) {
  // Every file is read and checked before anything is registered.
  std::vector<ops::custom::CustomOpSet> sets;
  std::vector<size_t> file_of_set;
  std::map<std::string, std::string> seen; // op -> source, within this folder
  for (size_t f = 0; f < files.size(); ++f) {
    KILN_ASSIGN_OR_RETURN(std::vector<ops::custom::CustomOpSpec> specs,
                          ops::custom::parseCustomOpFile(files[f].xml, files[f].path));
    for (const ops::custom::CustomOpSpec &spec : specs) {
      KILN_ASSIGN_OR_RETURN(ops::custom::CustomOpSet set, ops::custom::buildCustomOps(spec));
      for (const ops::custom::BuiltOp &op : set.ops) {
        auto [it, fresh] = seen.emplace(op.def.name, op.def.source);
        if (!fresh)
          return Error(op.def.source + ": op " + op.def.name + " is defined twice (also at " +
                       it->second + ")");
      }
      sets.push_back(std::move(set));
      file_of_set.push_back(f);
    }
  }

  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  ops::OpRegistry &registry = ops::OpRegistry::global();
  std::vector<std::pair<const ops::custom::BuiltOp *, size_t>> fresh; // op, its file
  for (size_t i = 0; i < sets.size(); ++i) {
    for (const ops::custom::BuiltOp &op : sets[i].ops) {
      if (!registry.find(op.def.name)) {
        fresh.emplace_back(&op, file_of_set[i]);
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
  std::map<size_t, size_t> stored; // file here -> index in state.files
  for (const auto &[op, f] : fresh) {
    KILN_RETURN_IF_ERROR(registry.add(op->def, op->impl));
    auto [it, first] = stored.emplace(f, state.files.size());
    if (first)
      state.files.push_back(files[f]);
    state.ops[op->def.name] = Loaded{op->def.source, fingerprintOf(op->def), it->second};
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

std::vector<CustomOpSource> customOpSourcesFor(const Graph &graph) {
  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  std::set<size_t> used;
  for (const Node &node : graph.nodes())
    if (auto it = state.ops.find(node.op); it != state.ops.end())
      used.insert(it->second.file);
  std::vector<CustomOpSource> files;
  for (size_t f : used)
    files.push_back(state.files[f]);
  return files;
}

std::vector<std::string> customOpsWithoutGradient() {
  LoadedOps &state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.without_gradient;
}

} // namespace kiln::frontend
