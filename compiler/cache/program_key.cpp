// Hashing a program key's parts, as cache_key.cpp hashes a kernel's.
#include "compiler/cache/program_key.h"

#include "compiler/cache/sha256.h"

namespace kiln::cache {

CacheKey makeProgramKey(const ProgramKeyInputs &in) {
  const std::array<const std::string *, kProgramKeyPartNames.size()> values = {
      &in.model,  &in.request,       &in.job,        &in.job_files,
      &in.target, &in.host_features, &in.kiln_build, &in.codegen_options};
  CacheKey key;
  key.kind = EntryKind::Program;
  key.kernel_name = in.name;
  // Bump the domain string when the key's make-up changes, so old entries miss.
  Sha256 whole;
  whole.update("kiln-program-cache-key/1\n");
  for (size_t i = 0; i < values.size(); ++i) {
    std::string part_hex = sha256Hex(*values[i]);
    whole.update(kProgramKeyPartNames[i]);
    whole.update("=");
    whole.update(part_hex);
    whole.update("\n");
    key.parts.emplace_back(std::string(kProgramKeyPartNames[i]), std::move(part_hex));
  }
  key.hex = toHex(whole.finish());
  return key;
}

} // namespace kiln::cache
