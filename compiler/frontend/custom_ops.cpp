#include "compiler/frontend/custom_ops.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "ops/custom/custom_op.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

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

// A folder's *.xml files, in name order.
Expected<std::vector<ops::OpSourceFile>> readFolder(const std::string &dir) {
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
  std::vector<ops::OpSourceFile> files;
  for (const fs::path &path : paths) {
    KILN_ASSIGN_OR_RETURN(std::string xml, readFile(path.string()));
    files.push_back({path.string(), std::move(xml)});
  }
  return files;
}

// Adds one op definition (the op, then its gradient ops) defined in `file`.
// An op the registry has already, defined the same way, is left as it is.
Status addOpSet(ops::OpRegistry &registry, const ops::custom::CustomOpSet &set,
                const std::shared_ptr<const ops::OpSourceFile> &file) {
  for (size_t i = 0; i < set.ops.size(); ++i) {
    const ops::custom::BuiltOp &op = set.ops[i];
    if (const ops::RegisteredOp *existing = registry.find(op.def.name)) {
      if (!existing->file)
        return Error(op.def.source + ": op " + op.def.name +
                     " is the name of a built-in op (kiln ops lists them): rename the custom op");
      if (fingerprintOf(existing->def) != fingerprintOf(op.def))
        return Error(op.def.source + ": op " + op.def.name + " is defined already, differently, " +
                     "at " + existing->def.source + ": rename one of them");
      continue;
    }
    const std::string no_gradient = i == 0 ? set.no_gradient : "";
    if (!no_gradient.empty())
      spdlog::debug("custom op {} has no gradient rule: {}", op.def.name, no_gradient);
    KILN_RETURN_IF_ERROR(registry.add(ops::RegisteredOp{op.def, op.impl, file, no_gradient}));
  }
  return Status::ok();
}

// Adds the ops of one folder's files (or of an artifact's embedded files).
Status addFiles(ops::OpRegistry &registry, const std::vector<ops::OpSourceFile> &files) {
  std::map<std::string, std::string> seen; // op -> source, within these files
  for (const ops::OpSourceFile &source : files) {
    auto file = std::make_shared<const ops::OpSourceFile>(source);
    KILN_ASSIGN_OR_RETURN(std::vector<ops::custom::CustomOpSpec> specs,
                          ops::custom::parseCustomOpFile(source.xml, source.path));
    for (const ops::custom::CustomOpSpec &spec : specs) {
      KILN_ASSIGN_OR_RETURN(ops::custom::CustomOpSet set, ops::custom::buildCustomOps(spec));
      for (const ops::custom::BuiltOp &op : set.ops) {
        auto [it, fresh] = seen.emplace(op.def.name, op.def.source);
        if (!fresh)
          return Error(op.def.source + ": op " + op.def.name + " is defined twice (also at " +
                       it->second + ")");
      }
      KILN_RETURN_IF_ERROR(addOpSet(registry, set, file));
    }
  }
  return Status::ok();
}

// A registry over the built-in ops with the ops of each group of files (a
// folder: a name defined twice within it is an error); none gives null.
Expected<std::shared_ptr<const ops::OpRegistry>>
layerOf(const std::vector<std::vector<ops::OpSourceFile>> &groups) {
  if (groups.empty())
    return std::shared_ptr<const ops::OpRegistry>();
  auto registry = std::make_shared<ops::OpRegistry>(&ops::OpRegistry::builtin());
  for (const std::vector<ops::OpSourceFile> &files : groups)
    KILN_RETURN_IF_ERROR(addFiles(*registry, files));
  return std::shared_ptr<const ops::OpRegistry>(std::move(registry));
}

} // namespace

Expected<std::shared_ptr<const ops::OpRegistry>>
loadCustomOps(const std::vector<std::string> &dirs) {
  std::vector<std::vector<ops::OpSourceFile>> folders;
  for (const std::string &dir : dirs) {
    KILN_ASSIGN_OR_RETURN(std::vector<ops::OpSourceFile> files, readFolder(dir));
    folders.push_back(std::move(files));
  }
  return layerOf(folders);
}

Expected<std::shared_ptr<const ops::OpRegistry>>
loadCustomOpSources(const std::vector<ops::OpSourceFile> &files) {
  if (files.empty())
    return std::shared_ptr<const ops::OpRegistry>();
  return layerOf({files});
}

std::vector<ops::OpSourceFile> customOpSourcesFor(const Graph &graph) {
  const ops::OpRegistry &registry = ops::opsOf(graph);
  std::set<const ops::OpSourceFile *> seen;
  std::vector<ops::OpSourceFile> files;
  for (const Node &node : graph.nodes())
    if (const ops::RegisteredOp *op = registry.find(node.op); op && op->file)
      if (seen.insert(op->file.get()).second)
        files.push_back(*op->file);
  return files;
}

} // namespace kiln::frontend
