// A compiled program as the program cache keeps it: everything `kiln compile`
// prints and writes for one model request (the summary, the pass report, the
// graph after the passes with its kernel plan and memory plan, the kernels'
// keys), without the kernels' objects, which stay in their own entries.
//
// Payload format (the object of a program entry, cache_entry.h; integers
// little-endian):
//
//   payload := head_size:u64  report_size:u64  head  report  bucket
//   head    := head_size bytes of JSON:
//              {"format_version": 1,
//               "summary": {"graph", "nodes_before", "nodes", "groups",
//                           "passes": [{"name", "match_times", "effect_times"}],
//                           "settings": [{"setting", "source", "entry", "op_types", "nodes"}],
//                           "kernels", "unique_kernels"},
//               "bucket": {"seq", "batch", "kernels",
//                          "objects": [{"key", "symbol", "kind"}],
//                          "custom_ops": [{"path", "xml"}]}}
//   report  := report_size bytes of JSON: the pass report with the kernel table
//   bucket  := the rest: the bucket's JSON as an artifact holds it
//              (compiler/artifact/artifact.h), "object" indexing head.bucket.objects
//
// Format versions:
//   1 (2026-12-03): first version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/artifact/artifact.h"
#include "passes/setting_match.h"
#include "support/error.h"

namespace kiln::driver {

inline constexpr int64_t kProgramPayloadVersion = 1;

// A pass that changed the graph, as the compile summary lists it.
struct PassLine {
  std::string name;
  int64_t match_times = 0;
  int64_t effect_times = 0;
  bool operator==(const PassLine &) const = default;
};

// What `kiln compile` prints of one compile.
struct ProgramSummary {
  std::string graph; // its name
  int64_t nodes_before = 0;
  int64_t nodes = 0; // after the passes
  int64_t groups = 0;
  std::vector<PassLine> passes;
  std::vector<passes::SettingMatch> settings;
  int64_t kernels = 0; // in execution order
  int64_t unique_kernels = 0;
};

struct CompiledProgram {
  ProgramSummary summary;
  // JSON text of the pass report (passes::reportToJson) with the "kernels"
  // table: what --report writes, less this run's kernel counts.
  std::string report;
  // The graph after the passes, its kernel plan and memory plan. Empty text
  // when it cannot be one (kernels fell back); the objects' code and key
  // parts are not kept in the payload.
  artifact::EncodedBucket bucket;
};

// An error when a name or setting is not UTF-8 (JSON cannot hold it).
Expected<std::string> encodeProgramPayload(const CompiledProgram &program);
// Rejects truncation, an unknown version and malformed JSON, each with its
// own message; the objects come back without code or key parts.
Expected<CompiledProgram> decodeProgramPayload(std::string_view payload);

} // namespace kiln::driver
