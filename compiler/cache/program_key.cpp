// Hashing a program key's parts, as cache_key.cpp hashes a kernel's.
#include "compiler/cache/program_key.h"

#include "compiler/cache/cache_key.h"

namespace kiln::cache {

CacheKey makeProgramKey(const ProgramKeyInputs &in) {
  CacheKey key = hashKeyParts("kiln-program-cache-key/1",
                              {kProgramKeyPartNames.begin(), kProgramKeyPartNames.end()},
                              {&in.model, &in.request, &in.job, &in.job_files, &in.target,
                               &in.host_features, &in.kiln_build, &in.codegen_options});
  key.kind = EntryKind::Program;
  key.kernel_name = in.name;
  return key;
}

} // namespace kiln::cache
