#include "runtime/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "ir/file_io.h"
#include "ir/safetensors.h"

namespace kiln::runtime {
namespace fs = std::filesystem;
namespace {

constexpr const char *kFormat = "kiln.checkpoint";

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// "step-000012.safetensors" -> 12; -1 for other names.
int64_t stepOf(const std::string &name) {
  const std::string prefix = "step-", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.substr(name.size() - suffix.size()) != suffix)
    return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 15 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(digits);
}

} // namespace

Expected<std::string> writeCheckpoint(const std::string &dir, const TrainingState &state) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error("checkpoint folder '" + dir + "': " + ec.message());
  SafetensorsFile file;
  file.metadata = {{"format", kFormat},
                   {"step", std::to_string(state.step)},
                   {"updates", std::to_string(state.updates)},
                   {"loss_scale", exact(state.loss_scale)},
                   {"good_steps", std::to_string(state.good_steps)},
                   {"overflows_in_a_row", std::to_string(state.overflows_in_a_row)},
                   {"seed", std::to_string(state.seed)}};
  for (const auto &[name, t] : state.weights)
    file.tensors[name] = t;
  for (const auto &[name, t] : state.moments)
    file.tensors[name] = t;
  char name[48];
  std::snprintf(name, sizeof(name), "step-%06lld.safetensors", static_cast<long long>(state.step));
  const std::string path = (fs::path(dir) / name).string();
  // Checkpoints a killed run was writing, whatever their step.
  removeStaleTemporaries(dir,
                         [](std::string_view target) { return stepOf(std::string(target)) >= 0; });
  KILN_RETURN_IF_ERROR(writeSafetensors(path, file));
  return path;
}

Expected<TrainingState> readCheckpoint(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(SafetensorsFile file, readSafetensors(path));
  return checkpointFromSafetensors(std::move(file), path);
}

Expected<TrainingState> checkpointFromSafetensors(SafetensorsFile file, const std::string &path) {
  auto meta = [&](const char *key) -> Expected<std::string> {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      return Error(path + ": not a kiln checkpoint (no '" + std::string(key) +
                   "' in the safetensors metadata)");
    return it->second;
  };
  KILN_ASSIGN_OR_RETURN(std::string format, meta("format"));
  if (format != kFormat)
    return Error(path + ": metadata format is '" + format + "', expected '" + kFormat + "'");
  TrainingState s;
  int64_t *const counters[] = {&s.step, &s.updates, &s.good_steps, &s.overflows_in_a_row};
  const char *const counter_keys[] = {"step", "updates", "good_steps", "overflows_in_a_row"};
  try {
    for (size_t i = 0; i < 4; ++i) {
      KILN_ASSIGN_OR_RETURN(std::string text, meta(counter_keys[i]));
      *counters[i] = std::stoll(text);
    }
    KILN_ASSIGN_OR_RETURN(std::string scale, meta("loss_scale"));
    s.loss_scale = std::stod(scale);
    KILN_ASSIGN_OR_RETURN(std::string seed, meta("seed"));
    s.seed = std::stoull(seed);
  } catch (const std::exception &) {
    return Error(path + ": a counter in the checkpoint metadata is not a number");
  }
  if (s.step < 0 || s.updates < 0 || s.updates > s.step || !(s.loss_scale >= 1))
    return Error(path + ": inconsistent counters (step " + std::to_string(s.step) + ", updates " +
                 std::to_string(s.updates) + ", loss scale " + exact(s.loss_scale) + ")");
  for (auto &[name, t] : file.tensors)
    (name.rfind("adam.", 0) == 0 ? s.moments : s.weights)[name] = std::move(t);
  return s;
}

Expected<std::optional<std::string>> latestCheckpoint(const std::string &dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return std::optional<std::string>();
  int64_t best = -1;
  std::string best_path;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    const int64_t step = stepOf(e.path().filename().string());
    if (e.is_regular_file() && step > best) {
      best = step;
      best_path = e.path().string();
    }
  }
  if (ec)
    return Error("checkpoint folder '" + dir + "': " + ec.message());
  return best < 0 ? std::optional<std::string>() : std::optional<std::string>(best_path);
}

} // namespace kiln::runtime
