// Recognising and reading the inputs of `kiln report`.
#include "compiler/report/report_inputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "support/file_io.h"

namespace kiln::report {
namespace {

namespace fs = std::filesystem;

const char *const kWhatKilnReads =
    "expected a kiln train --log-json file, the JSON of kiln plan --format json, or a --profile "
    "folder (with op_summary.csv)";

std::optional<double> number(const nlohmann::json &line, const char *key) {
  auto it = line.find(key);
  if (it == line.end() || !it->is_number())
    return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

bool isTrainingLine(const nlohmann::json &line) {
  return line.is_object() && line.contains("step") && line.contains("loss");
}

bool isPlan(const nlohmann::json &doc) {
  return doc.is_object() && doc.contains("candidates") && doc["candidates"].is_array();
}

double fieldNumber(const std::string &text) {
  char *end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && std::isfinite(v) ? v : 0;
}

std::vector<TimedEntry> longestFirst(std::unordered_map<std::string, TimedEntry> &&by_name) {
  std::vector<TimedEntry> out;
  for (auto &[name, entry] : by_name)
    out.push_back(std::move(entry));
  std::sort(out.begin(), out.end(), [](const TimedEntry &a, const TimedEntry &b) {
    return a.total_us != b.total_us ? a.total_us > b.total_us : a.name < b.name;
  });
  return out;
}

Expected<ReportInput> readProfileFolder(const std::string &path) {
  const fs::path summary = fs::path(path) / "op_summary.csv";
  std::error_code ec;
  if (!fs::is_regular_file(summary, ec))
    return Error(path + ": a folder without op_summary.csv: " + kWhatKilnReads);
  auto text = readFile(summary.string(), kMaxStreamBytes);
  if (!text)
    return text.error();
  std::string fusion;
  if (const fs::path f = fs::path(path) / "fusion_op.csv"; fs::is_regular_file(f, ec)) {
    auto read = readFile(f.string(), kMaxStreamBytes);
    if (!read)
      return read.error();
    fusion = std::move(*read);
  }
  auto profile = parseProfile(*text, fusion, summary.string());
  if (!profile)
    return profile.error();
  profile->source = path;
  return ReportInput(std::move(*profile));
}

} // namespace

std::vector<std::vector<std::string>> csvRows(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    std::vector<std::string> row{""};
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        row.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        row.emplace_back();
      } else {
        row.back() += c;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Expected<TrainingLog> parseTrainingLog(std::string_view text, const std::string &source) {
  TrainingLog log{source, {}};
  size_t at = 0, line_number = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos)
      end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos)
      continue;
    const std::string where = source + ":" + std::to_string(line_number);
    auto json = parseJson(line, where);
    if (!json)
      return json.error();
    if (!isTrainingLine(*json) || !(*json)["step"].is_number_integer())
      return Error(where + ": not a training log line (expected a JSON object with an integer "
                           "\"step\" and a \"loss\", as kiln train --log-json writes)");
    TrainingStep step;
    step.step = (*json)["step"].get<int64_t>();
    step.loss = number(*json, "loss");
    step.loss_scale = number(*json, "loss_scale");
    step.grad_norm = number(*json, "grad_norm");
    step.lr = number(*json, "lr");
    step.tokens_per_s = number(*json, "tokens_per_s");
    step.overflow = json->value("overflow", false) == true;
    for (const auto &[key, value] : json->items())
      if ((key.rfind("eval", 0) == 0 || key.rfind("val_", 0) == 0) && value.is_number() &&
          std::isfinite(value.get<double>()))
        step.eval[key] = value.get<double>();
    log.steps.push_back(std::move(step));
  }
  if (log.steps.empty())
    return Error(source + ": an empty training log: no step to draw");
  // A resumed run appends to its log: the last line of a step wins.
  std::stable_sort(log.steps.begin(), log.steps.end(),
                   [](const TrainingStep &a, const TrainingStep &b) { return a.step < b.step; });
  std::vector<TrainingStep> unique;
  for (TrainingStep &s : log.steps) {
    if (!unique.empty() && unique.back().step == s.step)
      unique.back() = std::move(s);
    else
      unique.push_back(std::move(s));
  }
  log.steps = std::move(unique);
  return log;
}

Expected<LayoutPlan> parseLayoutPlan(const nlohmann::json &plan, const std::string &source) {
  if (!isPlan(plan))
    return Error(source + ": not a plan (expected kiln plan --format json's \"candidates\")");
  LayoutPlan out;
  out.source = source;
  if (plan.contains("target") && plan["target"].is_string())
    out.target = plan["target"].get<std::string>();
  if (plan.contains("command") && plan["command"].is_string())
    out.command = plan["command"].get<std::string>();
  if (plan.contains("device_memory") && plan["device_memory"].is_number_integer())
    out.device_memory = plan["device_memory"].get<int64_t>();
  if (plan.contains("devices") && plan["devices"].is_number_integer())
    out.devices = plan["devices"].get<int64_t>();
  std::string recommended;
  if (plan.contains("recommended") && plan["recommended"].is_object() &&
      plan["recommended"].contains("flags") && plan["recommended"]["flags"].is_string())
    recommended = plan["recommended"]["flags"].get<std::string>();
  size_t index = 0;
  for (const nlohmann::json &c : plan["candidates"]) {
    const std::string where = source + ": candidates[" + std::to_string(index++) + "]";
    if (!c.is_object() || !c.contains("peak_bytes") || !c["peak_bytes"].is_number() ||
        !c.contains("fits") || !c["fits"].is_boolean())
      return Error(where + ": expected an object with \"peak_bytes\" and \"fits\"");
    PlanCandidate candidate;
    candidate.peak_bytes = c["peak_bytes"].get<int64_t>();
    candidate.fits = c["fits"].get<bool>();
    candidate.tokens_per_s_per_device = number(c, "tokens_per_s_per_device").value_or(0);
    if (c.contains("flags") && c["flags"].is_string())
      candidate.flags = c["flags"].get<std::string>();
    if (c.contains("reason") && c["reason"].is_string())
      candidate.reason = c["reason"].get<std::string>();
    if (c.contains("memory") && c["memory"].is_object()) {
      const nlohmann::json &m = c["memory"];
      if (m.contains("at") && m["at"].is_string())
        candidate.memory_at = m["at"].get<std::string>();
      if (m.contains("parts") && m["parts"].is_array())
        for (const nlohmann::json &part : m["parts"]) {
          if (!part.is_object() || !part.contains("name") || !part["name"].is_string() ||
              !part.contains("bytes") || !part["bytes"].is_number_integer())
            return Error(where + ": memory.parts: expected objects with \"name\" and \"bytes\"");
          candidate.memory.emplace_back(part["name"].get<std::string>(),
                                        part["bytes"].get<int64_t>());
        }
    }
    candidate.recommended = !recommended.empty() && candidate.flags == recommended;
    out.candidates.push_back(std::move(candidate));
  }
  return out;
}

Expected<Profile> parseProfile(std::string_view op_summary, std::string_view fusion_op,
                               const std::string &source) {
  const auto rows = csvRows(op_summary);
  if (rows.empty())
    return Error(source + ": empty; expected msprof's op_summary.csv header");
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < rows[0].size(); ++i)
    column[rows[0][i]] = i;
  for (const char *needed :
       {"Step Id", "Device_id", "Op Name", "OP Type", "Task Type", "Task Duration(us)"})
    if (!column.count(needed))
      return Error(source + ": no column '" + needed + "' (not an op_summary.csv of kiln's)");

  std::unordered_map<std::string, std::string> formed_by;
  const auto fusion_rows = csvRows(fusion_op);
  if (!fusion_rows.empty()) {
    const auto &head = fusion_rows[0];
    const auto op = std::find(head.begin(), head.end(), "Fusion Op");
    const auto pass = std::find(head.begin(), head.end(), "Formed By");
    if (op != head.end() && pass != head.end())
      for (size_t r = 1; r < fusion_rows.size(); ++r) {
        const size_t o = op - head.begin(), p = pass - head.begin();
        if (o < fusion_rows[r].size() && p < fusion_rows[r].size())
          formed_by.emplace(fusion_rows[r][o], fusion_rows[r][p]);
      }
  }

  Profile profile;
  profile.source = source;
  std::unordered_map<std::string, TimedEntry> kernels, op_types;
  std::set<std::string> steps, devices;
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto &row = rows[r];
    if (row.size() != rows[0].size())
      return Error(source + ": row " + std::to_string(r + 1) + " has " +
                   std::to_string(row.size()) + " fields, the header " +
                   std::to_string(rows[0].size()));
    auto field = [&](const char *name) -> const std::string & { return row[column.at(name)]; };
    const double us = fieldNumber(field("Task Duration(us)"));
    profile.total_us += us;
    steps.insert(field("Step Id"));
    devices.insert(field("Device_id"));
    TimedEntry &type = op_types[field("OP Type")];
    type.name = type.op_type = field("OP Type");
    type.task_type = field("Task Type");
    ++type.count;
    type.total_us += us;
    if (field("Task Type") == "HOST") // the runtime's own work, not a kernel
      continue;
    TimedEntry &kernel = kernels[field("Op Name")];
    kernel.name = field("Op Name");
    kernel.op_type = field("OP Type");
    kernel.task_type = field("Task Type");
    if (auto it = formed_by.find(kernel.name); it != formed_by.end())
      kernel.formed_by = it->second;
    ++kernel.count;
    kernel.total_us += us;
  }
  profile.kernels = longestFirst(std::move(kernels));
  profile.op_types = longestFirst(std::move(op_types));
  profile.steps = static_cast<int64_t>(steps.size());
  profile.devices = static_cast<int64_t>(devices.size());
  return profile;
}

Expected<std::vector<ReportInput>> readReportInputs(const std::vector<std::string> &paths) {
  std::vector<ReportInput> inputs;
  for (const std::string &path : paths) {
    KILN_ASSIGN_OR_RETURN(ReportInput input, readReportInput(path));
    inputs.push_back(std::move(input));
  }
  return inputs;
}

Expected<ReportInput> readReportInput(const std::string &path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    return Error(path + ": no such file or folder");
  if (fs::is_directory(status))
    return readProfileFolder(path);
  auto text = readFile(path, kMaxStreamBytes);
  if (!text)
    return text.error();
  // A whole JSON document: a plan (or a one-line training log).
  if (auto doc = parseJson(*text, path); doc && isPlan(*doc)) {
    auto plan = parseLayoutPlan(*doc, path);
    if (!plan)
      return plan.error();
    return ReportInput(std::move(*plan));
  }
  // JSON lines: the first line decides.
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos) {
    const size_t end = text->find('\n', first);
    auto line = parseJson(
        std::string_view(*text).substr(first, end == std::string::npos ? end : end - first), path);
    if (line && isTrainingLine(*line)) {
      auto log = parseTrainingLog(*text, path);
      if (!log)
        return log.error();
      return ReportInput(std::move(*log));
    }
  }
  return Error(path + ": not an input kiln report knows: " + kWhatKilnReads);
}

} // namespace kiln::report
