// Fuzzes the artifact reader (*.kiln: header, manifest, buckets with their
// graphs, kernel tables and memory plans, objects) with the trailing
// checksum and signature made valid; an accepted artifact round-trips.
#include "compiler/artifact/artifact.h"
#include "tests/fuzz/checksum_fixup.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string source = "fuzz/job.kiln";
  const std::string bytes = fuzz::withValidArtifactTrailer(fuzz::asText(data, size));
  auto artifact = artifact::decodeArtifact(bytes, source);
  fuzz::requireNamesSource(artifact, source);
  if (!artifact)
    return 0;
  (void)artifact->seqList();
  auto encoded = artifact::encodeArtifact(*artifact, fuzz::signingKey());
  fuzz::require(encoded.isOk(), "an accepted artifact cannot be written",
                encoded ? "" : encoded.message());
  auto again = artifact::decodeArtifact(*encoded, source);
  fuzz::require(again.isOk(), "an artifact written by encodeArtifact is refused",
                again ? "" : again.message());
  return 0;
}
