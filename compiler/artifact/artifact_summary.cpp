// kiln inspect's summary of an artifact and its text form.
#include "compiler/artifact/artifact_summary.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "compiler/artifact/artifact_loader.h"
#include "support/byte_size.h"

namespace kiln::artifact {

using nlohmann::json;

namespace {

std::string utcTime(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// Columns padded to their widest cell.
std::string table(const std::vector<std::vector<std::string>> &rows, const std::string &indent) {
  std::vector<size_t> width;
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      width.resize(std::max(width.size(), row.size()), 0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::ostringstream os;
  for (const auto &row : rows) {
    os << indent;
    for (size_t c = 0; c < row.size(); ++c) {
      os << row[c];
      if (c + 1 < row.size())
        os << std::string(width[c] - row[c].size() + 2, ' ');
    }
    os << "\n";
  }
  return os.str();
}

json bucketSummary(const Artifact &artifact, const Bucket &b, size_t largest) {
  json kernels = json::array();
  std::map<int, int> objects;
  for (const PlannedKernel &k : b.kernels) {
    kernels.push_back({{"name", k.name},
                       {"kind", k.kind},
                       {"formed_by", k.formed_by},
                       {"key", k.key},
                       {"object", k.object}});
    objects[k.object] = 1;
  }
  json groups = json::array();
  const std::vector<std::vector<NodeId>> members = b.graph.groupMembers();
  for (size_t g = 0; g < b.graph.groups().size(); ++g) {
    const FusionGroup &group = b.graph.groups()[g];
    groups.push_back({{"name", group.name},
                      {"kind", group.kernel},
                      {"formed_by", group.formed_by},
                      {"intermediates", std::string(intermediatesName(group.intermediates))},
                      {"members", members[g].size()}});
  }
  std::vector<const executable::BufferPlacement *> by_size;
  for (const executable::BufferPlacement &p : b.memory.buffers)
    by_size.push_back(&p);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [](const executable::BufferPlacement *x, const executable::BufferPlacement *y) {
                     return x->bytes > y->bytes;
                   });
  json top = json::array();
  for (size_t i = 0; i < by_size.size() && i < largest; ++i)
    top.push_back({{"value", by_size[i]->value},
                   {"bytes", by_size[i]->bytes},
                   {"offset", by_size[i]->offset},
                   {"first", by_size[i]->first},
                   {"last", by_size[i]->last}});
  return {{"seq", b.seq},
          {"batch", b.batch},
          {"graph", b.graph.name()},
          {"nodes", b.graph.numNodes()},
          {"kernels", std::move(kernels)},
          {"objects", objects.size()},
          {"groups", std::move(groups)},
          {"memory",
           {{"peak_bytes", b.memory.peak_bytes},
            {"total_bytes", b.memory.total_bytes},
            {"alignment", b.memory.alignment},
            {"buffers", b.memory.buffers.size()},
            {"largest", std::move(top)}}}};
}

} // namespace

json summarizeArtifact(const Artifact &artifact, uint64_t file_bytes, size_t largest) {
  json objects = json::array();
  uint64_t object_bytes = 0;
  for (const ArtifactObject &o : artifact.objects) {
    objects.push_back(
        {{"key", o.key}, {"symbol", o.symbol}, {"kind", o.kind}, {"bytes", o.code.size()}});
    object_bytes += o.code.size();
  }
  json s{{"file", artifact.source},
         {"bytes", file_bytes},
         {"format_version", kArtifactFormatVersion},
         {"manifest", manifestToJson(artifact.manifest)},
         {"objects", std::move(objects)},
         {"object_bytes", object_bytes}};
  json custom_ops = json::array();
  for (const ops::OpSourceFile &file : artifact.custom_ops)
    custom_ops.push_back(file.path);
  s["custom_ops"] = std::move(custom_ops);
  // The signature verified when the file was read; whether its key is trusted:
  s["signer"] = {{"key", publicKeyHex(artifact.signer)},
                 {"fingerprint", keyFingerprint(artifact.signer)}};
  Status trusted = checkTrustedSigner(artifact, false);
  s["signer"]["trusted"] = trusted.isOk();
  // Loading checks every bucket the same way: say the first thing that refuses it.
  Status compatible = trusted ? checkCompatible(artifact)
                              : Status(Error("its signer is not trusted (kiln keys trust " +
                                             publicKeyHex(artifact.signer) + ")"));
  for (size_t i = 0; compatible && i < artifact.buckets.size(); ++i)
    compatible = loadBucket(artifact, artifact.buckets[i]).status();
  s["runs_here"] = compatible.isOk();
  if (!compatible)
    s["refused_because"] = compatible.message();
  json buckets = json::array();
  for (const Bucket &b : artifact.buckets)
    buckets.push_back(bucketSummary(artifact, b, largest));
  s["buckets"] = std::move(buckets);
  return s;
}

namespace {

// One bucket of summaryToText: its kernels, fusion groups and memory plan.
std::string bucketText(const json &b, size_t shown) {
  // "    ... and 2,000 more (kiln inspect --kernels all lists them)"
  auto more = [](size_t listed, size_t total) {
    return "    ... and " + std::to_string(total - listed) +
           " more (kiln inspect --kernels all lists them)\n";
  };
  std::ostringstream os;
  const json &mem = b["memory"];
  os << "\nbucket seq " << b["seq"].get<int64_t>() << " (batch " << b["batch"].get<int64_t>()
     << "): graph '" << b["graph"].get<std::string>() << "', " << b["nodes"].get<int64_t>()
     << " nodes, " << b["kernels"].size() << " kernels (" << b["objects"].get<int64_t>()
     << " objects), " << b["groups"].size() << " fused groups\n";
  os << "  kernels:\n";
  std::vector<std::vector<std::string>> rows{{"#", "NAME", "KIND", "FORMED BY", "KEY", "OBJECT"}};
  for (size_t i = 0; i < b["kernels"].size() && i < shown; ++i) {
    const json &k = b["kernels"][i];
    rows.push_back(
        {std::to_string(i), k["name"].get<std::string>(), k["kind"].get<std::string>(),
         k["formed_by"].get<std::string>().empty() ? "-" : k["formed_by"].get<std::string>(),
         k["key"].get<std::string>().substr(0, 12), std::to_string(k["object"].get<int>())});
  }
  if (shown > 0)
    os << table(rows, "    ");
  if (b["kernels"].size() > shown)
    os << more(shown, b["kernels"].size());
  std::map<std::string, int> by_pass;
  for (const json &g : b["groups"])
    ++by_pass[g["formed_by"].get<std::string>()];
  os << "  fusion groups: " << b["groups"].size();
  std::string sep = " (";
  for (const auto &[pass, n] : by_pass) {
    os << sep << pass << " " << n;
    sep = ", ";
  }
  os << (by_pass.empty() ? "" : ")") << "\n";
  rows = {{"NAME", "KIND", "FORMED BY", "MEMBERS", "INTERMEDIATES"}};
  for (size_t i = 0; i < b["groups"].size() && i < shown; ++i) {
    const json &g = b["groups"][i];
    rows.push_back({g["name"].get<std::string>(), g["kind"].get<std::string>(),
                    g["formed_by"].get<std::string>(), std::to_string(g["members"].get<int64_t>()),
                    g["intermediates"].get<std::string>()});
  }
  if (!b["groups"].empty() && shown > 0)
    os << table(rows, "    ");
  if (b["groups"].size() > shown)
    os << more(shown, b["groups"].size());
  const int64_t peak = mem["peak_bytes"].get<int64_t>(), total = mem["total_bytes"].get<int64_t>();
  char reuse[32];
  std::snprintf(reuse, sizeof(reuse), "%.2fx", peak > 0 ? double(total) / double(peak) : 1.0);
  os << "  memory plan: peak " << formatBytes(peak) << " (" << peak << " bytes) in one arena; "
     << formatBytes(total) << " with a buffer per value (" << reuse << "), "
     << mem["buffers"].get<int64_t>() << " buffers, " << mem["alignment"].get<int64_t>()
     << "-byte aligned\n";
  rows = {{"LARGEST", "BYTES", "OFFSET", "LIVE (KERNELS)"}};
  for (const json &p : mem["largest"])
    rows.push_back(
        {p["value"].get<std::string>(), formatBytes(p["bytes"].get<int64_t>()),
         std::to_string(p["offset"].get<int64_t>()),
         std::to_string(p["first"].get<int>()) + ".." + std::to_string(p["last"].get<int>())});
  if (!mem["largest"].empty())
    os << table(rows, "    ");
  return os.str();
}

} // namespace

std::string summaryToText(const json &s, size_t shown) {
  const json &m = s["manifest"];
  const json &job = m["job"];
  std::ostringstream os;
  os << s["file"].get<std::string>() << ": kiln artifact, format " << s["format_version"].get<int>()
     << ", " << formatBytes(s["bytes"].get<int64_t>()) << " (" << s["bytes"].get<int64_t>()
     << " bytes)\n";
  std::vector<std::string> off;
  size_t on = 0;
  for (const json &p : job.value("passes", json::array())) {
    if (p.value("enabled", false))
      ++on;
    else
      off.push_back(p.value("name", std::string("?")));
  }
  std::string off_text;
  for (const std::string &p : off)
    off_text += (off_text.empty() ? "" : ", ") + p;
  const json &model = m["model"];
  const std::string features = m["host"]["features"].get<std::string>();
  const size_t feature_count =
      features.empty() ? 0 : std::count(features.begin(), features.end(), ',') + 1;
  os << table(
      {{"built by", "kiln " + m["kiln_version"].get<std::string>() + " (sources " +
                        m["kiln_source_hash"].get<std::string>().substr(0, 12) + "), LLVM " +
                        m["llvm_version"].get<std::string>() + ", " +
                        utcTime(m["created"].get<int64_t>())},
       {"host", m["host"]["triple"].get<std::string>() + ", CPU " +
                    m["host"]["cpu"].get<std::string>() + ", " + std::to_string(feature_count) +
                    " features"},
       {"signed by", "key " + s["signer"]["fingerprint"].get<std::string>() +
                         (s["signer"]["trusted"].get<bool>() ? ", trusted" : ", NOT trusted") +
                         " (signature verified over the whole file)"},
       {"runs here", s["runs_here"].get<bool>() ? std::string("yes")
                                                : "no: " + s["refused_because"].get<std::string>()},
       {"target", m["target"].value("name", std::string("?"))},
       {"model", model["path"].get<std::string>() + " ('" + model["name"].get<std::string>() +
                     "'), " + (model["training"].get<bool>() ? "training step" : "forward") +
                     ", batch " + std::to_string(model["batch"].get<int64_t>())},
       {"job", job.value("dtype", std::string("?")) + " model, overflow " +
                   job.value("overflow_mode", std::string("?")) + ", precision " +
                   job.value("precision_mode", std::string("?"))},
       {"passes",
        std::to_string(on) + " on" + (off.empty() ? std::string() : ", off: " + off_text)},
       {"codegen", "overflow " + m["codegen"]["overflow"].get<std::string>() + ", O" +
                       std::to_string(m["codegen"]["opt_level"].get<int>())},
       {"objects", std::to_string(s["objects"].size()) + " distinct (" +
                       formatBytes(s["object_bytes"].get<int64_t>()) + ")"},
       {"custom ops",
        [&] {
          std::string files;
          for (const json &f : s["custom_ops"])
            files += (files.empty() ? "" : ", ") + f.get<std::string>();
          return files.empty() ? std::string("none") : files;
        }()}},
      "  ");
  for (const json &b : s["buckets"])
    os << bucketText(b, shown);
  return os.str();
}

} // namespace kiln::artifact
