// The compatibility checks and the re-derivation of a bucket's kernels.
#include "compiler/artifact/artifact_loader.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "compiler/artifact/kernel_derivation.h"

namespace kiln::artifact {
namespace {

std::set<std::string> splitFeatures(const std::string &features) {
  std::set<std::string> out;
  std::stringstream in(features);
  for (std::string f; std::getline(in, f, ',');)
    if (!f.empty())
      out.insert(f);
  return out;
}

// "a, b, c and 4 more"
std::string listSome(const std::vector<std::string> &items, size_t most = 5) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < most; ++i)
    s += (i ? ", " : "") + items[i];
  if (items.size() > most)
    s += " and " + std::to_string(items.size() - most) + " more";
  return s;
}

// What differs between the artifact's host and this one.
std::vector<std::string> hostDifferences(const codegen::HostDescription &stored,
                                         const codegen::HostDescription &here) {
  std::vector<std::string> diffs;
  if (stored.triple != here.triple)
    diffs.push_back("host triple " + stored.triple + " (this host: " + here.triple + ")");
  if (stored.cpu != here.cpu)
    diffs.push_back("host CPU " + stored.cpu + " (this host: " + here.cpu + ")");
  if (stored.features != here.features) {
    const std::set<std::string> a = splitFeatures(stored.features),
                                b = splitFeatures(here.features);
    std::vector<std::string> only_there, only_here;
    for (const std::string &f : a)
      if (f[0] == '+' && !b.count(f))
        only_there.push_back(f.substr(1));
    for (const std::string &f : b)
      if (f[0] == '+' && !a.count(f))
        only_here.push_back(f.substr(1));
    std::string d = "host CPU features";
    if (!only_there.empty())
      d += ": compiled with " + listSome(only_there) + ", which this host lacks";
    if (!only_here.empty())
      d += std::string(only_there.empty() ? ":" : ";") + " this host has " + listSome(only_here) +
           ", which the compile did not use";
    diffs.push_back(d);
  }
  return diffs;
}

std::string seqText(const Bucket &bucket) { return "bucket seq " + std::to_string(bucket.seq); }

} // namespace

std::string recompileHint(const Artifact &artifact) {
  const Manifest &m = artifact.manifest;
  std::string seqs;
  for (const Bucket &b : artifact.buckets)
    seqs += (seqs.empty() ? "" : ",") + std::to_string(b.seq);
  std::string cmd = "kiln compile " + m.model.path + (m.model.training ? " --training" : "") +
                    " --batch " + std::to_string(m.model.batch) + " --seq " + seqs + " --target " +
                    m.target.name + " --dtype " + std::string(dtypeName(m.dtype)) +
                    " --overflow-mode " + std::string(overflowModeName(m.overflow));
  const nlohmann::json &job = m.job;
  if (job.contains("precision_mode") && job["precision_mode"].is_string())
    cmd += " --precision-mode " + job["precision_mode"].get<std::string>();
  std::vector<std::string> on, off;
  if (job.contains("passes") && job["passes"].is_array())
    for (const nlohmann::json &p : job["passes"]) {
      if (!p.is_object() || !p.contains("name") || !p.contains("enabled") ||
          !p.contains("default") || !p["name"].is_string() || p["enabled"] == p["default"])
        continue;
      (p["enabled"] == true ? on : off).push_back(p["name"].get<std::string>());
    }
  for (const std::string &p : on)
    cmd += " --enable-pass " + p;
  for (const std::string &p : off)
    cmd += " --disable-pass " + p;
  return cmd + " -o " + artifact.source;
}

Status checkTrustedSigner(const Artifact &artifact, bool trust_anyway) {
  if (trust_anyway)
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(TrustStore store, loadTrustStore());
  if (store.trusts(artifact.signer))
    return Status::ok();
  return Error(artifact.source + ": signed by key " + keyFingerprint(artifact.signer) +
               ", which this user does not trust: it holds native code that would run here. "
               "Trusted are your own key (" +
               keyFingerprint(store.own_key) + ") and the " + std::to_string(store.keys.size()) +
               " key(s) in " + store.path + ". If you trust whoever built it: kiln keys trust " +
               publicKeyHex(artifact.signer) + " [--name NAME], or run once with --trust-artifact");
}

Status checkCompatible(const Artifact &artifact) {
  const Manifest &m = artifact.manifest;
  const cache::CacheKeyInputs here = codegen::baseKeyInputs(m.target, m.codegen);
  std::vector<std::string> diffs;
  if (m.kiln_version != here.kiln_version)
    diffs.push_back("kiln version " + m.kiln_version + " (this is kiln " + here.kiln_version + ")");
  if (m.llvm_version != here.llvm_version)
    diffs.push_back("LLVM " + m.llvm_version + " (this kiln: LLVM " + here.llvm_version + ")");
  for (std::string &d : hostDifferences(m.host, codegen::hostDescription()))
    diffs.push_back(std::move(d));
  if (m.kiln_source_hash != here.kiln_source_hash)
    diffs.push_back("kiln's code-generation sources (source hash " +
                    m.kiln_source_hash.substr(0, 12) + ", this kiln " +
                    here.kiln_source_hash.substr(0, 12) + ")");
  if (diffs.empty())
    return Status::ok();
  std::string s;
  for (const std::string &d : diffs)
    s += (s.empty() ? "" : "; ") + d;
  return Error(artifact.source + ": compiled for another kiln or host, refusing to run it: " + s +
               "; recompile it with this kiln: " + recompileHint(artifact));
}

Expected<const Bucket *> selectBucket(const Artifact &artifact, int64_t seq) {
  if (const Bucket *b = artifact.findBucket(seq))
    return b;
  return Error(artifact.source + ": no bucket for seq " + std::to_string(seq) +
               " (the artifact has seq " + artifact.seqList() +
               "); pad the inputs to one of them or recompile with --seq " + std::to_string(seq));
}

Expected<LoadedBucket> loadBucket(const Artifact &artifact, const Bucket &bucket) {
  KILN_RETURN_IF_ERROR(checkCompatible(artifact));
  const Manifest &m = artifact.manifest;
  const std::string where = artifact.source + ": " + seqText(bucket);
  LoadedBucket loaded{bucket.graph, {}};
  loaded.kernels.overflow = m.codegen.overflow;
  auto derived = deriveKernels(loaded.graph, m.target, m.codegen);
  if (!derived)
    return Error(where + ": " + derived.message() +
                 "; recompile it with this kiln: " + recompileHint(artifact));
  if (derived->size() != bucket.kernels.size())
    return Error(where + ": the graph partitions into " + std::to_string(derived->size()) +
                 " kernels, the plan lists " + std::to_string(bucket.kernels.size()) +
                 "; recompile it with this kiln: " + recompileHint(artifact));

  std::map<int, int> local_object; // artifact object -> index in loaded.kernels.objects
  for (size_t i = 0; i < derived->size(); ++i) {
    DerivedKernel &d = (*derived)[i];
    const PlannedKernel &p = bucket.kernels[i];
    if (d.spec.name != p.name)
      return Error(where + ": kernel " + std::to_string(i) + " is '" + d.spec.name + "' here, '" +
                   p.name +
                   "' in the plan; recompile it with this kiln: " + recompileHint(artifact));
    if (d.key.hex != p.key) {
      const ArtifactObject &o = artifact.objects[p.object];
      std::vector<std::string> parts;
      for (const auto &[name, hex] : d.key.parts) {
        auto stored = std::find_if(o.parts.begin(), o.parts.end(),
                                   [&](const auto &part) { return part.first == name; });
        if (stored == o.parts.end() || stored->second != hex)
          parts.push_back(name);
      }
      return Error(where + ": kernel '" + p.name +
                   "': the key this kiln computes differs from the stored one (" +
                   (parts.empty() ? std::string("key parts unknown") : listSome(parts, 7)) +
                   " changed); recompile it with this kiln: " + recompileHint(artifact));
    }
    auto [it, fresh] =
        local_object.emplace(p.object, static_cast<int>(loaded.kernels.objects.size()));
    if (fresh)
      loaded.kernels.objects.push_back(artifact.objects[p.object].code);
    codegen::CompiledKernel k;
    k.spec = std::move(d.spec);
    k.gemm = d.build.gemm;
    k.launch = codegen::launchOf(d.build.program);
    k.tiling = d.tiling;
    k.key = p.key;
    k.symbol = p.symbol;
    k.object = it->second;
    loaded.kernels.kernels.push_back(std::move(k));
  }
  loaded.kernels.stats.total = static_cast<int64_t>(loaded.kernels.kernels.size());
  loaded.kernels.stats.unique = static_cast<int64_t>(loaded.kernels.objects.size());
  return loaded;
}

} // namespace kiln::artifact
