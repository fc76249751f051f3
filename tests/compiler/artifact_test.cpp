// Artifacts: the file format's round trip and every malformation it rejects.
// Loading has artifact_loader_test.cpp, the memory plan
// tests/executable/memory_plan_test.cpp.
#include <filesystem>
#include <functional>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "executable/memory_plan.h"
#include "formats/graph_json.h"
#include "tests/compiler/artifact_test_util.h"

namespace kiln::artifact {
namespace {

TEST_F(ArtifactFormat, RoundTrip) {
  ASSERT_EQ(split(bytes()).manifest.size() + 32 < bytes().size(), true);
  EXPECT_EQ(assemble(split(bytes())), bytes()); // the test's grammar is the header's
  Artifact a = decoded();
  EXPECT_EQ(a.source, "job.kiln");
  ASSERT_EQ(a.buckets.size(), 2u);
  EXPECT_EQ(a.buckets[0].seq, 8);
  EXPECT_EQ(a.buckets[1].seq, 16);
  EXPECT_EQ(a.seqList(), "8, 16");
  const Manifest &m = a.manifest, &want = artifact().manifest;
  EXPECT_EQ(manifestToJson(m), manifestToJson(want));
  EXPECT_EQ(m.kiln_version, thisKilnVersion());
  EXPECT_EQ(m.host.toString(), codegen::hostDescription().toString());
  EXPECT_EQ(m.llvm_version, codegen::llvmVersion());
  EXPECT_EQ(m.model.path, kTiny);
  EXPECT_FALSE(m.model.training);
  EXPECT_EQ(m.job["dtype"], "f16");
  EXPECT_FALSE(m.job["passes"].empty());
  for (const json &p : m.job["passes"])
    EXPECT_TRUE(p.contains("enabled") && p["enabled"].is_boolean()) << p.dump();
  for (size_t i = 0; i < a.buckets.size(); ++i) {
    const Bucket &got = a.buckets[i], &exp = artifact().buckets[i];
    EXPECT_EQ(graphToJson(got.graph), graphToJson(exp.graph));
    EXPECT_EQ(memoryPlanToJson(got.memory), memoryPlanToJson(exp.memory));
    ASSERT_EQ(got.kernels.size(), exp.kernels.size());
    for (size_t k = 0; k < got.kernels.size(); ++k) {
      EXPECT_EQ(got.kernels[k].name, exp.kernels[k].name);
      EXPECT_EQ(got.kernels[k].key, exp.kernels[k].key);
      EXPECT_EQ(got.kernels[k].object, exp.kernels[k].object);
      EXPECT_EQ(got.kernels[k].inputs, exp.kernels[k].inputs);
      EXPECT_EQ(got.kernels[k].outputs, exp.kernels[k].outputs);
    }
  }
  ASSERT_EQ(a.objects.size(), artifact().objects.size());
  for (size_t i = 0; i < a.objects.size(); ++i) {
    EXPECT_EQ(a.objects[i].key, artifact().objects[i].key);
    EXPECT_EQ(a.objects[i].code, artifact().objects[i].code);
    EXPECT_EQ(a.objects[i].parts, artifact().objects[i].parts);
  }
  EXPECT_EQ(encode(a), bytes()); // Ed25519 signatures are deterministic
}

TEST_F(ArtifactFormat, ObjectsAreStoredOncePerKey) {
  std::set<std::string> keys;
  size_t kernels = 0;
  for (const Bucket &b : artifact().buckets) {
    kernels += b.kernels.size();
    for (const PlannedKernel &k : b.kernels)
      keys.insert(k.key);
  }
  EXPECT_EQ(artifact().objects.size(), keys.size());
  EXPECT_LT(artifact().objects.size(), kernels);
  // The seq-8 and seq-16 buckets share the kernels whose shapes do not depend on seq.
  std::set<int> used8, used16;
  for (const PlannedKernel &k : artifact().buckets[0].kernels)
    used8.insert(k.object);
  for (const PlannedKernel &k : artifact().buckets[1].kernels)
    used16.insert(k.object);
  EXPECT_LT(artifact().objects.size(), used8.size() + used16.size());
}

TEST_F(ArtifactFormat, FileRoundTripIsAtomicAndReadable) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_artifact_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "job.kiln").string();
  ASSERT_TRUE(writeArtifact(path, artifact(), key()));
  auto a = readArtifact(path);
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->source, path);
  EXPECT_EQ(std::filesystem::file_size(path), bytes().size());
  size_t files = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator(dir))
    ++files;
  EXPECT_EQ(files, 1u); // no temporary left behind
  auto missing = readArtifact((dir / "none.kiln").string());
  ASSERT_FALSE(missing);
  EXPECT_HAS(missing.message(), "none.kiln");
  std::filesystem::remove_all(dir);
}

TEST_F(ArtifactFormat, RejectsBadMagicVersionAndHeader) {
  std::string b = bytes();
  b[0] = 'X';
  EXPECT_HAS(decodeError(b), "bad magic");
  EXPECT_HAS(decodeError("just some text that is not an artifact at all, long enough to be one"),
             "bad magic");
  RawArtifact raw = split(bytes());
  raw.version = 99;
  std::string e = decodeError(assemble(raw));
  EXPECT_HAS(e, "unknown artifact format version 99");
  EXPECT_HAS(e, "this kiln reads " + std::to_string(artifact::kArtifactFormatVersion));
  raw = split(bytes());
  raw.reserved = 7;
  EXPECT_HAS(decodeError(assemble(raw)), "reserved");
}

TEST_F(ArtifactFormat, RejectsTruncationAtEveryPlace) {
  EXPECT_HAS(decodeError(""), "truncated");
  EXPECT_HAS(decodeError(bytes().substr(0, 40)), "truncated");
  const RawArtifact raw = split(bytes());
  // Cut inside the manifest, a bucket, an object and the checksum.
  for (size_t cut :
       {size_t(100), 32 + raw.manifest.size() + 20, bytes().size() - 200, bytes().size() - 1}) {
    // Cut, the signature no longer verifies; cut and signed again, the parser finds the cut.
    std::string e = decodeError(bytes().substr(0, cut));
    EXPECT_TRUE(e.find("truncated") != std::string::npos ||
                e.find("signature does not verify") != std::string::npos)
        << "cut at " << cut << ": " << e;
    if (cut < bytes().size() - kArtifactSignatureSize) {
      e = decodeError(signedBy(key(), bytes().substr(0, cut)));
      EXPECT_TRUE(e.find("truncated") != std::string::npos ||
                  e.find("checksum mismatch") != std::string::npos)
          << "cut at " << cut << ": " << e;
    }
  }
  EXPECT_HAS(decodeError(signedBy(key(), bytes().substr(0, 32 + raw.manifest.size() + 20))),
             "truncated");
}

TEST_F(ArtifactFormat, RejectsTrailingBytes) {
  EXPECT_HAS(decodeError(signedBy(key(), assembleUnsigned(split(bytes()), "x"))), "trailing bytes");
  EXPECT_HAS(decodeError(bytes() + "x"), "trailing bytes"); // named before the signature
}

TEST_F(ArtifactFormat, RejectsABadChecksum) {
  const std::string body = unsigned_(bytes());
  for (size_t at : {size_t(40), body.size() / 2, body.size() - 40, body.size() - 1}) {
    std::string b = body;
    b[at] ^= 0x20;
    const std::string e = decodeError(signedBy(key(), b));
    // A flipped size byte reads as truncation or trailing bytes; any other as a bad checksum.
    EXPECT_TRUE(e.find("checksum mismatch") != std::string::npos ||
                e.find("truncated") != std::string::npos ||
                e.find("trailing bytes") != std::string::npos)
        << "byte " << at << ": " << e;
  }
  std::string b = body;
  b[body.size() - 100] ^= 0x01; // inside the last object
  EXPECT_HAS(decodeError(signedBy(key(), b)), "checksum mismatch");
}

// Whoever changes a byte after signing, even fixing the SHA-256, breaks the
// signature; signing again with another key names that key as the signer.
TEST_F(ArtifactFormat, TheSignatureCoversEveryByteAndNamesTheSigner) {
  const std::string body = unsigned_(bytes());
  for (size_t at : {size_t(40), body.size() / 2, body.size() - 100, body.size() - 1,
                    body.size() + 5, bytes().size() - 1}) {
    std::string b = bytes();
    b[at] ^= 0x01;
    EXPECT_HAS(decodeError(b), "signature does not verify");
  }
  EXPECT_EQ(decoded().signer, key().publicKey());
  auto other = SigningKey::generate();
  ASSERT_TRUE(other);
  auto resigned = decodeArtifact(signedBy(*other, body), "job.kiln");
  ASSERT_TRUE(resigned) << resigned.message();
  EXPECT_EQ(resigned->signer, other->publicKey());
  EXPECT_NE(resigned->signer, key().publicKey());
}

TEST_F(ArtifactFormat, RejectsAMalformedManifest) {
  RawArtifact raw = split(bytes());
  raw.manifest = "{not json";
  EXPECT_HAS(decodeError(assemble(raw)), "malformed manifest");
  std::string e = decodeError(withManifest(bytes(), [](json &m) { m["host"].erase("cpu"); }));
  EXPECT_HAS(e, "malformed manifest");
  EXPECT_HAS(e, "'cpu' must be a string");
  e = decodeError(withManifest(bytes(), [](json &m) { m["format"] = "kiln.graph"; }));
  EXPECT_HAS(e, "'format' must be \"kiln.artifact\"");
  e = decodeError(withManifest(bytes(), [](json &m) { m["target"]["memory"] = "lots"; }));
  EXPECT_HAS(e, "target");
  e = decodeError(withManifest(bytes(), [](json &m) { m["dtype"] = "f8"; }));
  EXPECT_HAS(e, "'dtype'");
  e = decodeError(withManifest(bytes(), [](json &m) { m["objects"].erase(0); }));
  EXPECT_HAS(e, "objects, the header");
  e = decodeError(withManifest(bytes(), [](json &m) { m["objects"][1]["key"] = "xyz"; }));
  EXPECT_HAS(e, "64 lower-case hex digits");
  e = decodeError(
      withManifest(bytes(), [](json &m) { m["objects"][1]["key"] = m["objects"][0]["key"]; }));
  EXPECT_HAS(e, "have the same key");
}

TEST_F(ArtifactFormat, RejectsABadBucket) {
  std::string e =
      decodeError(withBucket(bytes(), 0, [](json &b) { b["kernels"][3]["object"] = 999; }));
  EXPECT_HAS(e, "bucket 0 (seq 8): kernel '");
  EXPECT_HAS(e, "object index 999 out of range");
  e = decodeError(withBucket(bytes(), 0, [](json &b) { b["kernels"][3]["object"] = -1; }));
  EXPECT_HAS(e, "object index -1 out of range");
  e = decodeError(
      withBucket(bytes(), 1, [](json &b) { b["kernels"][0]["key"] = std::string(64, 'a'); }));
  EXPECT_HAS(e, "is not that of object");
  e = decodeError(withBucket(bytes(), 0, [](json &b) { b["kernels"][0]["inputs"][0] = "ghost"; }));
  EXPECT_HAS(e, "value 'ghost' is not in the bucket's graph");
  e = decodeError(withBucket(bytes(), 0, [](json &b) { b["graph"]["nodes"][0]["op"] = "Nope"; }));
  EXPECT_HAS(e, "bucket 0 (seq 8): graph");
  e = decodeError(withBucket(bytes(), 0, [](json &b) {
    b["memory"]["buffers"][1]["offset"] = b["memory"]["buffers"][2]["offset"];
  }));
  EXPECT_HAS(e, "memory plan");
  e = decodeError(withBucket(bytes(), 0, [](json &b) { b["seq"] = 9; }));
  EXPECT_HAS(e, "holds seq 9, the manifest lists seq 8");
  RawArtifact raw = split(bytes());
  raw.buckets[0] = "[1, 2";
  EXPECT_HAS(decodeError(assemble(raw)), "bucket 0: malformed");
}

// Found by tests/fuzz (artifact_fuzzer): job settings nested 10^5 deep in the
// manifest overflowed the stack while they were copied. Deep JSON is refused
// while parsing, in the manifest and in a bucket.
TEST_F(ArtifactFormat, RejectsDeeplyNestedJson) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  RawArtifact raw = split(bytes());
  const size_t job = raw.manifest.find("\"job\":{");
  ASSERT_NE(job, std::string::npos);
  raw.manifest.insert(job + 7, "\"deep\":" + deep + ",");
  std::string e = decodeError(assemble(raw));
  EXPECT_HAS(e, "malformed manifest: invalid JSON: arrays and objects nest deeper than 512");
  raw = split(bytes());
  raw.buckets[0] = "{\"graph\": " + deep + "}";
  EXPECT_HAS(decodeError(assemble(raw)), "bucket 0: malformed: invalid JSON: arrays and objects");
}

TEST_F(ArtifactFormat, RejectsADuplicateBucket) {
  RawArtifact raw = split(bytes());
  raw.buckets[1] = raw.buckets[0];
  json m = json::parse(raw.manifest);
  m["buckets"][1] = m["buckets"][0];
  raw.manifest = m.dump();
  EXPECT_HAS(decodeError(assemble(raw)), "duplicate bucket for seq 8");
}

} // namespace
} // namespace kiln::artifact
