#include "target/target.h"

#include <algorithm>

#include "support/file_io.h"
#include "support/json_reader.h"
#include "target/embedded_targets.h"

namespace kiln::target {

using nlohmann::json;

bool Target::supports(DType dtype) const {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

bool Target::cubeTakes(DType dtype) const {
  return std::find(cube_input_dtypes.begin(), cube_input_dtypes.end(), dtype) !=
         cube_input_dtypes.end();
}

bool Target::supports(OverflowMode mode) const {
  return std::find(overflow_modes.begin(), overflow_modes.end(), mode) != overflow_modes.end();
}

bool Target::hasFusedOp(std::string_view op) const {
  return std::find(fused_ops.begin(), fused_ops.end(), op) != fused_ops.end();
}

bool Target::fixpipeApplies(std::string_view op) const {
  return fixpipe.present && std::find(fixpipe.epilogue_ops.begin(), fixpipe.epilogue_ops.end(),
                                      op) != fixpipe.epilogue_ops.end();
}

namespace {

Expected<int64_t> positive(const JsonReader &r, const json &obj, const std::string &path,
                           std::string_view key) {
  KILN_ASSIGN_OR_RETURN(const json *v, r.member(obj, path, key));
  KILN_ASSIGN_OR_RETURN(int64_t i, r.integer(*v, JsonReader::child(path, key)));
  if (i <= 0)
    return r.error(JsonReader::child(path, key), "expected a positive integer");
  return i;
}

Expected<OverflowMode> overflowMode(const JsonReader &r, const json &v, const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::string s, r.asString(v, path));
  auto mode = parseOverflowMode(s);
  if (!mode)
    return r.error(path, "unknown overflow mode '" + s + "' (infnan or saturation)");
  return *mode;
}

} // namespace

// FixPipe, the cores and the memories.
Status parseUnits(const JsonReader &r, const json &doc, Target &t) {
  const std::string root = "$";
  KILN_ASSIGN_OR_RETURN(const json *fixpipe, r.object(doc, root, "fixpipe"));
  KILN_RETURN_IF_ERROR(r.checkKeys(*fixpipe, "$.fixpipe", {"present", "epilogue_ops"}));
  KILN_ASSIGN_OR_RETURN(t.fixpipe.present, r.boolean(*fixpipe, "$.fixpipe", "present"));
  KILN_ASSIGN_OR_RETURN(const json *epilogues, r.member(*fixpipe, "$.fixpipe", "epilogue_ops"));
  KILN_ASSIGN_OR_RETURN(t.fixpipe.epilogue_ops, r.stringList(*epilogues, "$.fixpipe.epilogue_ops"));
  if (!t.fixpipe.present && !t.fixpipe.epilogue_ops.empty())
    return r.error("$.fixpipe.epilogue_ops", "must be empty when FixPipe is not present");

  KILN_ASSIGN_OR_RETURN(const json *cores, r.object(doc, root, "cores"));
  KILN_RETURN_IF_ERROR(r.checkKeys(*cores, "$.cores", {"cube", "vector"}));
  KILN_ASSIGN_OR_RETURN(t.cube_cores, positive(r, *cores, "$.cores", "cube"));
  KILN_ASSIGN_OR_RETURN(t.vector_cores, positive(r, *cores, "$.cores", "vector"));

  KILN_ASSIGN_OR_RETURN(const json *memory, r.object(doc, root, "memory"));
  KILN_RETURN_IF_ERROR(r.checkKeys(
      *memory, "$.memory",
      {"ub_bytes", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes", "l2_bytes", "hbm_bytes"}));
  Memory &m = t.memory;
  for (auto [key, field] : {std::pair{"ub_bytes", &m.ub_bytes},
                            {"l1_bytes", &m.l1_bytes},
                            {"l0a_bytes", &m.l0a_bytes},
                            {"l0b_bytes", &m.l0b_bytes},
                            {"l0c_bytes", &m.l0c_bytes},
                            {"l2_bytes", &m.l2_bytes},
                            {"hbm_bytes", &m.hbm_bytes}}) {
    KILN_ASSIGN_OR_RETURN(*field, positive(r, *memory, "$.memory", key));
  }
  return Status::ok();
}

// A map from dtype to a positive rate, `key` of the document, when present.
Status peakRates(const JsonReader &r, const json &doc, const Target &t, const std::string &key,
                 std::map<DType, double> &rates) {
  if (!doc.contains(key))
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(const json *peak, r.object(doc, "$", key));
  for (auto it = peak->begin(); it != peak->end(); ++it) {
    const std::string path = JsonReader::child("$." + key, it.key());
    auto d = parseDType(it.key());
    if (!d || !t.supports(*d))
      return r.error(path, "'" + it.key() + "' is not one of $.dtypes");
    KILN_ASSIGN_OR_RETURN(double v, r.number(it.value(), path));
    if (!(v > 0))
      return r.error(path, "expected a positive number");
    rates[*d] = v;
  }
  return Status::ok();
}

Status parseInterconnect(const JsonReader &r, const json &doc, Interconnect &link) {
  if (!doc.contains("interconnect"))
    return Status::ok();
  const std::string path = "$.interconnect";
  KILN_ASSIGN_OR_RETURN(const json *obj, r.object(doc, "$", "interconnect"));
  KILN_RETURN_IF_ERROR(r.checkKeys(*obj, path,
                                   {"devices_per_node", "intra_node_gbps", "intra_node_latency_us",
                                    "inter_node_gbps", "inter_node_latency_us"}));
  KILN_ASSIGN_OR_RETURN(link.devices_per_node, positive(r, *obj, path, "devices_per_node"));
  for (auto [key, field] : {std::pair{"intra_node_gbps", &link.intra_node_gbps},
                            {"intra_node_latency_us", &link.intra_node_latency_us},
                            {"inter_node_gbps", &link.inter_node_gbps},
                            {"inter_node_latency_us", &link.inter_node_latency_us}}) {
    KILN_ASSIGN_OR_RETURN(const json *v, r.member(*obj, path, key));
    KILN_ASSIGN_OR_RETURN(*field, r.number(*v, JsonReader::child(path, key)));
    if (!(*field > 0))
      return r.error(JsonReader::child(path, key), "expected a positive number");
  }
  return Status::ok();
}

// The optional facts (the cube tile, bandwidths, peak throughput, what is
// unconfirmed); absent means unknown.
Status parseOptionalFacts(const JsonReader &r, const json &doc, Target &t) {
  const std::string root = "$";
  if (doc.contains("cube_tile")) {
    const json &tile = doc["cube_tile"];
    if (!tile.is_array() || tile.size() != 3)
      return r.error("$.cube_tile", "expected [m, n, k]");
    for (size_t i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(t.cube_tile[i], r.integer(tile[i], r.index("$.cube_tile", i)));
      if (t.cube_tile[i] <= 0)
        return r.error(r.index("$.cube_tile", i), "expected a positive integer");
    }
  }
  if (doc.contains("hbm_bandwidth_gbps")) {
    KILN_ASSIGN_OR_RETURN(t.hbm_bandwidth_gbps, positive(r, doc, root, "hbm_bandwidth_gbps"));
  }
  KILN_RETURN_IF_ERROR(peakRates(r, doc, t, "peak_tflops", t.peak_tflops));
  KILN_RETURN_IF_ERROR(peakRates(r, doc, t, "vector_peak_tflops", t.vector_peak_tflops));
  KILN_RETURN_IF_ERROR(parseInterconnect(r, doc, t.interconnect));
  if (doc.contains("unconfirmed")) {
    KILN_ASSIGN_OR_RETURN(t.unconfirmed, r.stringList(doc["unconfirmed"], "$.unconfirmed"));
  }
  if (doc.contains("fused_ops")) {
    KILN_ASSIGN_OR_RETURN(t.fused_ops, r.stringList(doc["fused_ops"], "$.fused_ops"));
  }
  return Status::ok();
}

Expected<Target> parseTarget(const json &doc, std::string_view source) {
  JsonReader r(source);
  const std::string root = "$";
  KILN_RETURN_IF_ERROR(
      r.checkKeys(doc, root,
                  {"format", "version", "name", "description", "dtypes", "cube_input_dtypes",
                   "overflow_modes", "default_overflow_mode", "fixpipe", "cores", "memory",
                   "vector_tile_elements", "cube_tile", "hbm_bandwidth_gbps", "peak_tflops",
                   "vector_peak_tflops", "interconnect", "unconfirmed", "fused_ops"}));
  KILN_ASSIGN_OR_RETURN(std::string format, r.string(doc, root, "format"));
  if (format != "kiln.target")
    return r.error("$.format", "expected \"kiln.target\", got \"" + format + "\"");
  KILN_ASSIGN_OR_RETURN(const json *version, r.member(doc, root, "version"));
  if (*version != 1)
    return r.error("$.version", "unsupported version (this kiln reads version 1)");

  Target t;
  KILN_ASSIGN_OR_RETURN(t.name, r.string(doc, root, "name"));
  KILN_ASSIGN_OR_RETURN(t.description, r.string(doc, root, "description"));
  KILN_ASSIGN_OR_RETURN(const json *dtypes, r.array(doc, root, "dtypes"));
  for (size_t i = 0; i < dtypes->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(std::string s, r.asString((*dtypes)[i], r.index("$.dtypes", i)));
    auto d = parseDType(s);
    if (!d)
      return r.error(r.index("$.dtypes", i), "unknown dtype '" + s + "'");
    t.dtypes.push_back(*d);
  }
  KILN_ASSIGN_OR_RETURN(const json *cube, r.array(doc, root, "cube_input_dtypes"));
  for (size_t i = 0; i < cube->size(); ++i) {
    const std::string path = r.index("$.cube_input_dtypes", i);
    KILN_ASSIGN_OR_RETURN(std::string s, r.asString((*cube)[i], path));
    auto d = parseDType(s);
    if (!d || !t.supports(*d))
      return r.error(path, "'" + s + "' is not one of $.dtypes");
    t.cube_input_dtypes.push_back(*d);
  }
  KILN_ASSIGN_OR_RETURN(const json *modes, r.array(doc, root, "overflow_modes"));
  for (size_t i = 0; i < modes->size(); ++i) {
    KILN_ASSIGN_OR_RETURN(OverflowMode m,
                          overflowMode(r, (*modes)[i], r.index("$.overflow_modes", i)));
    t.overflow_modes.push_back(m);
  }
  KILN_ASSIGN_OR_RETURN(const json *def, r.member(doc, root, "default_overflow_mode"));
  KILN_ASSIGN_OR_RETURN(t.default_overflow_mode, overflowMode(r, *def, "$.default_overflow_mode"));
  if (!t.supports(t.default_overflow_mode))
    return r.error("$.default_overflow_mode", "not one of $.overflow_modes");

  KILN_RETURN_IF_ERROR(parseUnits(r, doc, t));
  KILN_ASSIGN_OR_RETURN(t.vector_tile_elements, positive(r, doc, root, "vector_tile_elements"));

  KILN_RETURN_IF_ERROR(parseOptionalFacts(r, doc, t));
  return t;
}

json targetToJson(const Target &t) {
  auto names = [](const std::vector<DType> &dtypes) {
    json a = json::array();
    for (DType d : dtypes)
      a.push_back(dtypeName(d));
    return a;
  };
  json modes = json::array();
  for (OverflowMode m : t.overflow_modes)
    modes.push_back(overflowModeName(m));
  auto rates = [](const std::map<DType, double> &peak) {
    json o = json::object();
    for (const auto &[d, v] : peak)
      o[std::string(dtypeName(d))] = v;
    return o;
  };
  json doc = {
      {"format", "kiln.target"},
      {"version", 1},
      {"name", t.name},
      {"description", t.description},
      {"dtypes", names(t.dtypes)},
      {"cube_input_dtypes", names(t.cube_input_dtypes)},
      {"overflow_modes", modes},
      {"default_overflow_mode", overflowModeName(t.default_overflow_mode)},
      {"fixpipe", {{"present", t.fixpipe.present}, {"epilogue_ops", t.fixpipe.epilogue_ops}}},
      {"cores", {{"cube", t.cube_cores}, {"vector", t.vector_cores}}},
      {"memory",
       {{"ub_bytes", t.memory.ub_bytes},
        {"l1_bytes", t.memory.l1_bytes},
        {"l0a_bytes", t.memory.l0a_bytes},
        {"l0b_bytes", t.memory.l0b_bytes},
        {"l0c_bytes", t.memory.l0c_bytes},
        {"l2_bytes", t.memory.l2_bytes},
        {"hbm_bytes", t.memory.hbm_bytes}}},
      {"vector_tile_elements", t.vector_tile_elements},
      {"cube_tile", t.cube_tile},
      {"peak_tflops", rates(t.peak_tflops)},
      {"vector_peak_tflops", rates(t.vector_peak_tflops)},
      {"unconfirmed", t.unconfirmed},
  };
  if (t.hbm_bandwidth_gbps > 0)
    doc["hbm_bandwidth_gbps"] = t.hbm_bandwidth_gbps;
  if (!t.fused_ops.empty())
    doc["fused_ops"] = t.fused_ops;
  if (const Interconnect &l = t.interconnect; l.devices_per_node > 0)
    doc["interconnect"] = {{"devices_per_node", l.devices_per_node},
                           {"intra_node_gbps", l.intra_node_gbps},
                           {"intra_node_latency_us", l.intra_node_latency_us},
                           {"inter_node_gbps", l.inter_node_gbps},
                           {"inter_node_latency_us", l.inter_node_latency_us}};
  return doc;
}

namespace {

std::string targetNameOf(const EmbeddedFile &file) {
  std::string_view path = file.path;
  path.remove_prefix(path.rfind('/') + 1);
  path.remove_suffix(std::string_view(".json").size());
  return std::string(path);
}

} // namespace

std::vector<std::string> builtinTargetNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile &file : embeddedTargetFiles())
    names.push_back(targetNameOf(file));
  return names;
}

Expected<Target> loadTarget(std::string_view name_or_path) {
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json") {
    std::string path(name_or_path);
    KILN_ASSIGN_OR_RETURN(json doc, readJsonFile(path));
    return parseTarget(doc, path);
  }
  for (const EmbeddedFile &file : embeddedTargetFiles()) {
    if (targetNameOf(file) != name_or_path)
      continue;
    KILN_ASSIGN_OR_RETURN(json doc, parseJson(file.contents, file.path));
    return parseTarget(doc, file.path);
  }
  std::string known;
  for (const std::string &n : builtinTargetNames())
    known += (known.empty() ? "" : ", ") + n;
  return Error("unknown target '" + std::string(name_or_path) + "' (built-in targets: " + known +
               "; or give a target .json file)");
}

} // namespace kiln::target
