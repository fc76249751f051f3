// Whole-file reads and atomic writes (temp file + rename), with errors that name the file.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace kiln {

Expected<std::string> readFile(const std::string &path);
// Writes to "<path>.tmp.<pid>.<n>" in the same folder, fsyncs, then renames over
// `path`, so a reader sees the old file or the new one, never a torn one.
Status writeFileAtomic(const std::string &path, std::string_view contents);

// Parses JSON; a syntax error names `source` and the line and column.
Expected<nlohmann::json> parseJson(std::string_view text, std::string_view source);
Expected<nlohmann::json> readJsonFile(const std::string &path);

} // namespace kiln
