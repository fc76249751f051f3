// Fuzzes the job-file reader, then resolves the job (target, precision,
// switch layers) when it names no folders or files to load.
#include <filesystem>

#include "compiler/driver/job.h"
#include "support/file_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/job.json";
  auto doc = parseJson(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(doc, kSource);
  if (!doc)
    return 0;
  // Relative paths in the job resolve into a folder that does not exist.
  auto job = driver::parseJob(*doc, std::string(kSource), "/nonexistent-kiln-fuzz");
  if (!job || !job->fusion_rule_dirs.empty() || !job->custom_op_dirs.empty() ||
      job->modify_mixlist || job->keep_dtype ||
      (job->target && job->target->find('/') != std::string::npos))
    return 0;
  driver::JobSettings command_line;
  command_line.source = "command line";
  (void)driver::resolveJob(*job, command_line, DType::F16);
  return 0;
}
