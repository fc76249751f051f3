// Whole-file reads and atomic writes (temp file + rename), with errors that name the file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln {

// Reading stops with an error past `max_bytes`, so that a file that never
// ends (/dev/zero, a pipe) or a huge one named where a small one belongs is
// refused before it fills memory.
Expected<std::string> readFile(const std::string &path, size_t max_bytes = SIZE_MAX);
// The rest of open descriptor `fd` (named `path` in errors), read to its end
// with interrupted reads retried, at most `max_bytes`; `size_hint` bytes are
// reserved up front (a regular file's size; more than max_bytes is an error).
// The caller closes `fd`.
Expected<std::string> readFd(int fd, const std::string &path, size_t max_bytes = SIZE_MAX,
                             uint64_t size_hint = 0);
// What readFile reads at most from a stream (a pipe, a device): it has no
// size to check before reading.
inline constexpr size_t kMaxStreamBytes = size_t{1} << 30;
// Writes to "<path>.tmp.<host>.<pid>.<n>" in the same folder (<host>: the
// host's name and pid namespace), fsyncs, renames over `path` and fsyncs
// the folder, so a reader sees the old file or the new one, never a torn
// one, even after a kill or a power cut. A kill leaves at most the temporary
// file behind, which no reader takes for the real one; the next write of
// `path` removes it.
Status writeFileAtomic(const std::string &path, std::string_view contents);
// Writes all `size` bytes to `fd`, retrying short and interrupted writes; the
// error is errno's text.
Status writeAll(int fd, const char *data, size_t size);
// The temporary file name writeFileAtomic uses for `path`: its `n`-th write
// in process `pid` of this host.
std::string temporaryPath(const std::string &path, long pid, long n);

// Removes the temporary files writeFileAtomic left in `dir` when a process
// of this host was killed while writing, for every file name `is_target`
// accepts: those whose process no longer runs. A running writer's
// temporaries are kept, and so are those of another host or pid namespace
// (the folder may be shared), whose processes cannot be checked from here.
// Best effort: returns how many it removed, and a folder it cannot read
// removes none.
size_t removeStaleTemporaries(const std::string &dir,
                              const std::function<bool(std::string_view)> &is_target);

// The deepest nesting of arrays and objects kiln reads. Its formats nest a
// few levels, and code that prints, copies or compares a JSON value recurses,
// so a document nested 10^5 deep would overflow the stack.
inline constexpr int kMaxJsonDepth = 512;

// Parses JSON; a syntax error names `source` and the line and column, and a
// document nested deeper than kMaxJsonDepth is refused before it is built.
Expected<nlohmann::json> parseJson(std::string_view text, std::string_view source);
// `value` as JSON text (indented by `indent`, -1: one line); text that is not
// valid UTF-8 (a Latin-1 name from a file) is an error naming `what`, where
// nlohmann would throw.
Expected<std::string> jsonText(const nlohmann::json &value, std::string_view what, int indent = -1);
// The largest JSON file kiln reads: its biggest, the graph of a whole
// training step, is a few MB.
inline constexpr size_t kMaxJsonFileBytes = size_t{256} << 20;
Expected<nlohmann::json> readJsonFile(const std::string &path);

} // namespace kiln
