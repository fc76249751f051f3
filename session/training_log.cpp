#include "session/training_log.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln::session {

Status keepLogUpTo(const std::string &path, int64_t steps_done) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::ok();
  KILN_ASSIGN_OR_RETURN(std::string text, readFile(path));
  std::string kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_object() || (row.contains("step") && row["step"].is_number_integer() &&
                             row["step"].get<int64_t>() > steps_done))
      continue;
    kept += line + "\n";
  }
  if (kept.size() == text.size())
    return Status::ok();
  return writeFileAtomic(path, kept);
}

} // namespace kiln::session
