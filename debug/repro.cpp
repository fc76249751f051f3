#include "debug/repro.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "formats/graph_json.h"
#include "passes/precision/precision_mode.h"
#include "passes/precision/setting_matches.h"
#include "support/file_io.h"
#include "target/target.h"

namespace kiln::debug {
namespace fs = std::filesystem;
namespace {

// Copies the files of `from` ending in `extension` (not its subfolders) to
// `to`, which is emptied first. `to` lies in `root`; a symbolic link on the
// way (left there, say, by whoever shared the folder) would make the
// emptying delete files outside it, so it is refused.
Status copyFolder(const std::string &from, const fs::path &root, const fs::path &to,
                  const std::string &extension) {
  std::error_code ec;
  for (fs::path p = to; p != root && p.has_relative_path(); p = p.parent_path())
    if (fs::is_symlink(fs::symlink_status(p, ec)))
      return Error("repro folder '" + root.string() + "': '" + p.string() +
                   "' is a symbolic link; kiln writes a repro only into plain folders (remove "
                   "the link or write the repro elsewhere)");
  fs::remove_all(to, ec);
  fs::create_directories(to, ec);
  if (ec)
    return Error("repro folder '" + to.string() + "': " + ec.message());
  for (const fs::directory_entry &e : fs::directory_iterator(from, ec)) {
    if (!e.is_regular_file() || e.path().extension() != extension)
      continue;
    KILN_ASSIGN_OR_RETURN(std::string contents, readFile(e.path().string()));
    KILN_RETURN_IF_ERROR(writeFileAtomic((to / e.path().filename()).string(), contents));
  }
  if (ec)
    return Error("'" + from + "': " + ec.message());
  return Status::ok();
}

// Copies one file the job reads to `dir/name`; returns `name` for the job file.
Expected<std::string> copyFile(const std::string &from, const fs::path &dir,
                               const std::string &name) {
  KILN_ASSIGN_OR_RETURN(std::string contents, readFile(from));
  KILN_RETURN_IF_ERROR(writeFileAtomic((dir / name).string(), contents));
  return name;
}

// The keep_dtype file for the reduced graph: the node names it still has
// (the others would be errors) and every OpType line.
std::string keepDTypeFor(const Graph &graph, const passes::KeepDType &keep) {
  const std::vector<std::string> missing = keep.missingNodeNames(graph);
  std::string text = "# " + keep.source + ", the entries this graph has\n";
  for (const passes::KeepDType::Entry &e : keep.entries)
    if (e.op_type || std::find(missing.begin(), missing.end(), e.written) == missing.end())
      text += e.written + "\n";
  return text;
}

Expected<nlohmann::json> reproJob(const fs::path &dir, const Graph &graph,
                                  const driver::ResolvedJob &job) {
  const driver::JobSettings &s = job.effective;
  nlohmann::json doc = {{"format", "kiln.job"}, {"version", 1}, {"name", "repro"}};
  const std::string target = s.target.value_or(job.target.name);
  if (target.size() > 5 && target.substr(target.size() - 5) == ".json") {
    KILN_RETURN_IF_ERROR(writeFileAtomic((dir / "target.json").string(),
                                         target::targetToJson(job.target).dump(2) + "\n"));
    doc["target"] = "target.json";
  } else {
    doc["target"] = target;
  }

  nlohmann::json precision = {{"dtype", dtypeName(job.dtype)},
                              {"overflow_mode", overflowModeName(job.overflow)}};
  if (s.precision_mode)
    precision["precision_mode"] = passes::precisionModeName(*s.precision_mode);
  if (s.modify_mixlist) {
    KILN_ASSIGN_OR_RETURN(precision["modify_mixlist"],
                          copyFile(*s.modify_mixlist, dir, "modify_mixlist.json"));
  }
  if (s.keep_dtype) {
    KILN_RETURN_IF_ERROR(writeFileAtomic((dir / "keep_dtype.txt").string(),
                                         keepDTypeFor(graph, job.context->precision().keep_dtype)));
    precision["keep_dtype"] = "keep_dtype.txt";
  }
  // Only the layers the reduced graph has; none left means the pass has
  // nothing to rewrite (an empty list would mean every layer): it is off.
  bool attention_layers_gone = false;
  if (s.attention_fp32_layers) {
    std::set<int64_t> present;
    for (const Node &n : graph.nodes())
      if (const int64_t l = passes::modelLayerOf(n.name);
          l >= 0 && s.attention_fp32_layers->count(l))
        present.insert(l);
    attention_layers_gone = present.empty() && !s.attention_fp32_layers->empty();
    if (!present.empty())
      precision["attention_fp32_layers"] = present;
  }
  doc["precision"] = precision;

  auto copies = [&](const std::vector<std::string> &dirs, const std::string &folder,
                    const std::string &extension) -> Expected<nlohmann::json> {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < dirs.size(); ++i) {
      const std::string rel = folder + "/" + std::to_string(i);
      KILN_RETURN_IF_ERROR(copyFolder(dirs[i], dir, dir / rel, extension));
      list.push_back(rel);
    }
    return list;
  };
  KILN_ASSIGN_OR_RETURN(doc["custom_ops"], copies(s.custom_op_dirs, "custom_ops", ".xml"));
  KILN_ASSIGN_OR_RETURN(doc["fusion_rules"], copies(s.fusion_rule_dirs, "fusion_rules", ".json"));

  // Every pass explicitly, so no default or switch file in between can differ.
  nlohmann::json enable = nlohmann::json::array(), disable = nlohmann::json::array();
  for (const passes::Pass *p : job.registry->ordered()) {
    const passes::PassInfo &info = p->info();
    const bool on = job.context->decide(*p).enabled &&
                    !(attention_layers_gone && info.name == "AttentionFp32CastPass");
    (on ? enable : disable).push_back(info.name);
  }
  doc["enable_passes"] = enable;
  doc["disable_passes"] = disable;
  return doc;
}

std::string readme(const Graph &graph, const ReproNotes &notes) {
  std::string s = "# Reproducer: " + std::to_string(graph.numNodes()) + " nodes\n\n";
  s += "Reduced by `kiln debug reduce` from `" + notes.origin + "` (" + notes.reduction + ").\n\n";
  s += "Run in this folder:\n\n```sh\nkiln compile graph.json --job job.json\n```\n\n";
  s += "It fails with:\n\n```\n" + notes.failure + "\n```\n\n";
  s += "`graph.json` is the graph the passes start from; `job.json` switches every pass\n"
       "explicitly and refers only to files in this folder.\n";
  return s;
}

} // namespace

Status writeRepro(const std::string &dir, const Graph &graph, const driver::ResolvedJob &job,
                  const ReproNotes &notes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error("repro folder '" + dir + "': " + ec.message());
  const fs::path root(dir);
  KILN_ASSIGN_OR_RETURN(nlohmann::json job_doc, reproJob(root, graph, job));
  KILN_RETURN_IF_ERROR(
      writeFileAtomic((root / "graph.json").string(), graphToJson(graph).dump(1) + "\n"));
  KILN_RETURN_IF_ERROR(writeFileAtomic((root / "job.json").string(), job_doc.dump(2) + "\n"));
  return writeFileAtomic((root / "README.md").string(), readme(graph, notes));
}

} // namespace kiln::debug
