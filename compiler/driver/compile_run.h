// What `kiln compile` runs for one command line: the model compiled at each
// sequence length asked for (compileProgram; one artifact bucket each), the
// report of what every pass did (one per length, under "buckets" when
// there are several; with the error, its code and location when a compile
// fails, for scripts), and for an artifact its manifest and buckets, then
// signed and encoded with what it holds counted for the line that names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/driver/program_compile.h"

namespace kiln::driver {

struct CompileRunRequest {
  ProgramRequest program;    // its model's seq is each of `seqs` in turn
  std::vector<int64_t> seqs; // empty: the config's
  bool report = false;       // keep every compile's report
  std::string artifact;      // with program.for_artifact: the file, named in errors
};

struct CompileRun {
  // What --report writes: filled when asked for, and on a failed compile
  // with what it got to and the error (reportWithError).
  nlohmann::json report;
  std::optional<artifact::Manifest> manifest; // for an artifact
  std::vector<artifact::EncodedBucket> buckets;
};

// The lengths' own checks, before anything compiles: none twice, several
// only into an artifact, an artifact not with passes only. An error
// names the flag.
Status checkCompileLengths(const std::vector<int64_t> &seqs, bool to_artifact, bool passes_only,
                           const std::string &output);

// Compiles `request` for `job` at each length in order into `run`, calling
// `on_compiled` with each compile (and its length; 0: the config's) as it
// is made, for what to print.
Status compileRun(const CompileRunRequest &request, const ResolvedJob &job, CompileRun &run,
                  const std::function<Status(const ProgramCompile &, int64_t)> &on_compiled);

// `report` (an object; null: an empty one) with "error": the message, and
// the code and location when the error has them.
nlohmann::json reportWithError(nlohmann::json report, const Error &error);

// An artifact signed with this user's key (artifact_signing.h) and encoded,
// and what it holds; `path` names it in errors.
struct SignedArtifact {
  std::string bytes;
  size_t buckets = 0, kernels = 0, objects = 0; // objects: distinct keys
  std::vector<int64_t> seqs;                    // ascending
  std::string key_fingerprint;
};
Expected<SignedArtifact> signArtifact(const artifact::Manifest &manifest,
                                      std::vector<artifact::EncodedBucket> buckets,
                                      const std::string &path);

} // namespace kiln::driver
