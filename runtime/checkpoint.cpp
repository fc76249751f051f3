#include "runtime/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "formats/safetensors.h"
#include "runtime/loss_scaler.h"
#include "support/file_io.h"

namespace kiln::runtime {
namespace fs = std::filesystem;
namespace {

constexpr const char *kFormat = "kiln.checkpoint";
constexpr const char *kSettingPrefix = "setting.";

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

// The whole of `text` as a number of type T; nothing otherwise.
template <typename T> std::optional<T> wholeNumber(const std::string &text) {
  T v{};
  const char *end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || at != end || text.empty())
    return std::nullopt;
  return v;
}

// The first element of `t` that is not finite (or, for a second moment,
// negative); -1 when there is none.
int64_t firstBadElement(const Tensor &t, bool non_negative) {
  if (!isFloat(t.dtype()))
    return -1;
  auto bad = [non_negative](float v) { return !std::isfinite(v) || (non_negative && v < 0); };
  if (t.dtype() == DType::F32) {
    const float *p = t.dataAs<float>();
    for (int64_t k = 0; k < t.numElements(); ++k)
      if (bad(p[k]))
        return k;
    return -1;
  }
  for (int64_t k = 0; k < t.numElements(); ++k)
    if (bad(t.getFloat(k)))
      return k;
  return -1;
}

} // namespace

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof(name), "step-%06lld.safetensors", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

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
  for (const auto &[key, value] : state.settings)
    file.metadata[kSettingPrefix + key] = value;
  for (const auto &[name, t] : state.weights)
    file.tensors[name] = t;
  for (const auto &[name, t] : state.moments)
    file.tensors[name] = t;
  const std::string path = checkpointPath(dir, state.step);
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
  for (size_t i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(std::string text, meta(counter_keys[i]));
    const std::optional<int64_t> v = wholeNumber<int64_t>(text);
    if (!v || *v < 0)
      return Error(path + ": metadata '" + counter_keys[i] + "' is '" + text +
                   "', expected a whole number of at least 0");
    *counters[i] = *v;
  }
  KILN_ASSIGN_OR_RETURN(std::string seed, meta("seed"));
  const std::optional<uint64_t> seed_value = wholeNumber<uint64_t>(seed);
  if (!seed_value)
    return Error(path + ": metadata 'seed' is '" + seed + "', expected a whole number");
  s.seed = *seed_value;
  KILN_ASSIGN_OR_RETURN(std::string scale, meta("loss_scale"));
  try {
    size_t used = 0;
    s.loss_scale = std::stod(scale, &used);
    if (used != scale.size())
      s.loss_scale = std::nan("");
  } catch (const std::exception &) {
    s.loss_scale = std::nan("");
  }
  if (!std::isfinite(s.loss_scale) || s.loss_scale < 1 || s.loss_scale > kMaxLossScale)
    return Error(path + ": metadata 'loss_scale' is '" + scale +
                 "', expected a finite number from 1 to " + exact(kMaxLossScale));
  if (s.updates > s.step)
    return Error(path + ": inconsistent counters (step " + std::to_string(s.step) + ", updates " +
                 std::to_string(s.updates) + "): more updates than steps");
  const int64_t named = stepOf(fs::path(path).filename().string());
  if (named >= 0 && named != s.step)
    return Error(path + ": the file is named for step " + std::to_string(named) +
                 " but its metadata says step " + std::to_string(s.step));
  for (const auto &[key, value] : file.metadata)
    if (key.rfind(kSettingPrefix, 0) == 0)
      s.settings[key.substr(std::string(kSettingPrefix).size())] = value;
  for (const auto &[name, t] : file.tensors) {
    const bool second_moment = name.rfind("adam.v.", 0) == 0;
    const int64_t bad = firstBadElement(t, second_moment);
    if (bad >= 0)
      return Error(path + ": tensor '" + name + "' element " + std::to_string(bad) + " is " +
                   exact(t.getFloat(bad)) +
                   (second_moment ? ", a second moment must be finite and at least 0"
                                  : ", expected a finite number") +
                   "; the checkpoint is damaged");
  }
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

Expected<int> pruneCheckpoints(const std::string &dir, int64_t keep) {
  std::error_code ec;
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    const int64_t step = stepOf(e.path().filename().string());
    if (step >= 0 && e.is_regular_file())
      steps.push_back({step, e.path()});
  }
  if (ec)
    return Error("checkpoint folder '" + dir + "': " + ec.message());
  std::sort(steps.begin(), steps.end());
  int removed = 0;
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    const std::string exported = checkpointExportDir(steps[i].second.string());
    if (fs::remove_all(exported, ec) == static_cast<std::uintmax_t>(-1))
      return Error(exported + ": cannot remove an old checkpoint's folder (" + ec.message() + ")");
    if (!fs::remove(steps[i].second, ec))
      return Error(steps[i].second.string() + ": cannot remove an old checkpoint (" +
                   (ec ? ec.message() : std::string("gone")) + ")");
    ++removed;
  }
  return removed;
}

std::string checkpointExportDir(const std::string &checkpoint) {
  fs::path p(checkpoint);
  return (p.parent_path() / (p.stem().string() + "-adapter")).string();
}

std::string settingsDiffer(const std::map<std::string, std::string> &recorded,
                           const std::map<std::string, std::string> &now) {
  std::string out;
  for (const auto &[key, value] : recorded) {
    auto it = now.find(key);
    if (it == now.end() || it->second == value)
      continue;
    out += (out.empty() ? "" : ", ") + key + " '" + value + "' (now '" + it->second + "')";
  }
  return out;
}

} // namespace kiln::runtime
