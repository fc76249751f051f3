#include "formats/hf_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "formats/safetensors.h"
#include "support/file_io.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A shard is a file beside its index: a plain name, never a path that
// leaves the folder.
bool plainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

Expected<std::map<std::string, Tensor>> readIndex(const std::string &index,
                                                  const TensorFileCheck &check) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, readJsonFile(index));
  auto weight_map = doc.is_object() ? doc.find("weight_map") : doc.end();
  if (weight_map == doc.end() || !weight_map->is_object())
    return Error(index + ": expected an object with \"weight_map\": {tensor name: shard file}");
  // Each shard read once, with the tensors the index places in it.
  std::map<std::string, std::vector<std::string>> listed;
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
    if (!it.value().is_string() || !plainFileName(it.value().get<std::string>()))
      return Error(index + ": weight_map['" + it.key() +
                   "'] must be the name of a shard file in the index's folder, got " +
                   it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    listed[it.value().get<std::string>()].push_back(it.key());
  }
  const fs::path folder = fs::path(index).parent_path();
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> shard_of;
  for (auto &[shard, names] : listed) {
    const std::string path = (folder / shard).string();
    std::error_code ec;
    if (!fs::exists(path, ec))
      return Error(index + ": shard '" + shard + "' (holding '" + names.front() +
                   "') is missing: no file " + path);
    KILN_ASSIGN_OR_RETURN(SafetensorsFile file, readSafetensors(path));
    for (const std::string &name : names)
      if (!file.tensors.count(name))
        return Error(path + ": no tensor '" + name + "', which " + index + " places in this shard");
    if (check)
      KILN_RETURN_IF_ERROR(check(path, file.tensors));
    for (auto &[name, t] : file.tensors) {
      auto [at, fresh] = shard_of.emplace(name, shard);
      if (!fresh)
        return Error(path + ": tensor '" + name + "' is also in shard '" + at->second +
                     "'; a checkpoint holds each tensor once");
      tensors.emplace(name, std::move(t));
    }
  }
  return tensors;
}

std::string shardName(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", k, n);
  return buf;
}

} // namespace

Expected<std::map<std::string, Tensor>> readHfWeights(const std::string &path,
                                                      const TensorFileCheck &check) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / kHfWeightsIndex, ec))
      return readIndex((dir / kHfWeightsIndex).string(), check);
    if (fs::exists(dir / kHfWeightsFile, ec))
      return readHfWeights((dir / kHfWeightsFile).string(), check);
    return Error(path + ": a model folder must hold " + kHfWeightsFile + " or " + kHfWeightsIndex +
                 " (a sharded checkpoint); neither is there");
  }
  if (path.ends_with(".json"))
    return readIndex(path, check);
  KILN_ASSIGN_OR_RETURN(SafetensorsFile file, readSafetensors(path));
  if (check)
    KILN_RETURN_IF_ERROR(check(path, file.tensors));
  return std::move(file.tensors);
}

Expected<std::vector<std::string>> writeHfWeights(const std::string &dir,
                                                  const std::map<std::string, Tensor> &tensors,
                                                  uint64_t max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error(dir + ": cannot create the folder: " + ec.message());
  // Shards filled in name order, a new one when the next tensor would not fit.
  std::vector<SafetensorsFile> shards(1);
  uint64_t filled = 0, total = 0;
  for (const auto &[name, t] : tensors) {
    const uint64_t bytes = t.byteSize();
    if (filled > 0 && filled + bytes > max_shard_bytes) {
      shards.emplace_back();
      filled = 0;
    }
    shards.back().tensors.emplace(name, t);
    filled += bytes;
    total += bytes;
  }
  // A reader prefers the index: the other layout's file must not outlive this one.
  fs::remove(fs::path(dir) / (shards.size() == 1 ? kHfWeightsIndex : kHfWeightsFile), ec);
  std::vector<std::string> written;
  if (shards.size() == 1) {
    const std::string path = (fs::path(dir) / kHfWeightsFile).string();
    KILN_RETURN_IF_ERROR(writeSafetensors(path, shards[0]));
    written.push_back(path);
    return written;
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}},
                          {"weight_map", nlohmann::json::object()}};
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string name = shardName(k + 1, shards.size());
    const std::string path = (fs::path(dir) / name).string();
    KILN_RETURN_IF_ERROR(writeSafetensors(path, shards[k]));
    written.push_back(path);
    for (const auto &[tensor, t] : shards[k].tensors)
      index["weight_map"][tensor] = name;
  }
  const std::string index_path = (fs::path(dir) / kHfWeightsIndex).string();
  KILN_ASSIGN_OR_RETURN(std::string text, jsonText(index, index_path, 2));
  KILN_RETURN_IF_ERROR(writeFileAtomic(index_path, text + "\n"));
  written.push_back(index_path);
  return written;
}

std::string unusedTensorsNote(const std::string &source, const std::vector<std::string> &names) {
  bool optimizer = true;
  for (const std::string &n : names)
    optimizer = optimizer && n.rfind("adam.", 0) == 0;
  const size_t n = names.size();
  return source + ": " + std::to_string(n) + (n == 1 ? " tensor is" : " tensors are") +
         " not a parameter of the model (" + (n == 1 ? "" : "e.g. ") + "'" + names.front() + "'" +
         (optimizer ? ", a kiln checkpoint's optimizer state" : "") + "); ignored";
}

} // namespace kiln
