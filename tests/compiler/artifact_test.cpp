// Artifacts: the file format's round trip and every malformation it rejects,
// and the loader's refusal of an artifact built by another kiln, host or code
// generator. The memory plan has artifact_memory_plan_test.cpp.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_builder.h"
#include "compiler/artifact/artifact_loader.h"
#include "compiler/artifact/artifact_summary.h"
#include "compiler/artifact/memory_plan.h"
#include "compiler/cache/sha256.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job_json.h"
#include "ir/graph_json.h"
#include "runtime/executor.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::artifact {
namespace {

using nlohmann::json;

const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

std::string thisKilnVersion() {
  return codegen::baseKeyInputs(*target::loadTarget("ascend910b"), {}).kiln_version;
}

// ---------------------------------------------------------------------------
// The tiny model compiled at seq 8 and 16, once for the suite.

const SigningKey *suite_key = nullptr; // signs every artifact the suite writes

struct Compiled {
  std::unique_ptr<SigningKey> key; // the suite's builder
  Artifact artifact;
  std::string bytes;
  Graph graph8;                      // the seq-8 graph as compiled
  codegen::CompiledKernels kernels8; // and its kernels
};

class ArtifactFormat : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    driver::JobSettings flags;
    flags.source = "test";
    auto job = driver::resolveJob(std::nullopt, flags, DType::F16);
    ASSERT_TRUE(job) << job.message();
    codegen::KernelCompileOptions options;
    options.object.overflow = job->overflow;
    compiled_ = new Compiled;
    std::optional<ArtifactBuilder> builder;
    for (int64_t seq : {16, 8}) { // out of order: the builder sorts
      auto graph = driver::buildModelGraph({kTiny, false, 1, seq}, *job);
      ASSERT_TRUE(graph) << graph.message();
      ASSERT_TRUE(driver::compileGraph(*graph, *job));
      auto kernels = codegen::compileKernels(*graph, job->target, options);
      ASSERT_TRUE(kernels) << kernels.message();
      if (!builder)
        builder.emplace(
            driver::makeManifest(*job, options.object, {kTiny, graph->name(), false, 1}));
      ASSERT_TRUE(builder->addBucket(seq, 1, *graph, *kernels));
      if (seq == 8) {
        compiled_->graph8 = *graph;
        compiled_->kernels8 = std::move(*kernels);
      }
    }
    compiled_->artifact = std::move(*builder).finish();
    compiled_->artifact.source = "job.kiln";
    auto key = SigningKey::generate();
    ASSERT_TRUE(key) << key.message();
    compiled_->key = std::make_unique<SigningKey>(std::move(*key));
    suite_key = compiled_->key.get();
    // The suite's artifacts run here, as a user's own would.
    ASSERT_TRUE(trustKey(suite_key->publicKey(), "artifact_test"));
    compiled_->bytes = encode(compiled_->artifact);
  }
  static void TearDownTestSuite() { delete compiled_; }

  static const Artifact &artifact() { return compiled_->artifact; }
  static const SigningKey &key() { return *compiled_->key; }
  static std::string encode(const Artifact &a) {
    auto b = encodeArtifact(a, key());
    EXPECT_TRUE(b) << b.message();
    return b ? *b : std::string();
  }
  static const std::string &bytes() { return compiled_->bytes; }

  static Artifact decoded() {
    auto a = decodeArtifact(bytes(), "job.kiln");
    EXPECT_TRUE(a) << a.message();
    return a ? std::move(*a) : Artifact{};
  }

  // The error decoding `data` gives; it must name the file.
  static std::string decodeError(std::string_view data) {
    auto a = decodeArtifact(data, "job.kiln");
    EXPECT_FALSE(a) << "decoded a malformed artifact";
    if (a)
      return "";
    EXPECT_EQ(a.message().rfind("job.kiln: ", 0), 0u) << a.message();
    return a.message();
  }

  static Compiled *compiled_;
};
Compiled *ArtifactFormat::compiled_ = nullptr;

#define EXPECT_HAS(text, fragment)                                                                 \
  EXPECT_NE((text).find(fragment), std::string::npos)                                              \
      << "missing '" << (fragment) << "' in: " << (text)

// The sections of a well-formed artifact, to tamper with and reassemble
// (the grammar of artifact.h, written out again here).
struct RawArtifact {
  uint32_t version = 0, reserved = 0;
  std::string manifest;
  std::vector<std::string> buckets, objects;
};

uint64_t le(std::string_view b, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= uint64_t(uint8_t(b[at + i])) << (8 * i);
  return v;
}
void putLe(std::string &out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    out.push_back(char(uint8_t(v >> (8 * i))));
}

RawArtifact split(const std::string &bytes) {
  RawArtifact raw;
  raw.version = uint32_t(le(bytes, 8, 4));
  const size_t buckets = le(bytes, 12, 4), objects = le(bytes, 16, 4);
  const size_t manifest = le(bytes, 24, 8);
  raw.manifest = bytes.substr(32, manifest);
  size_t at = 32 + manifest;
  for (size_t i = 0; i < buckets + objects; ++i) {
    const size_t size = le(bytes, at, 8);
    (i < buckets ? raw.buckets : raw.objects).push_back(bytes.substr(at + 8, size));
    at += 8 + size;
  }
  return raw;
}

// The bytes before the signature, signed by the suite's key (artifact.h's trailer).
std::string signedBy(const SigningKey &key, std::string body) {
  auto signature = key.sign(body);
  EXPECT_TRUE(signature) << signature.message();
  return body + key.publicKey() + (signature ? *signature : std::string());
}

std::string unsigned_(const std::string &bytes) {
  return bytes.substr(0, bytes.size() - kArtifactSignatureSize);
}

// `extra` goes between the last object and the checksum.
std::string assembleUnsigned(const RawArtifact &raw, const std::string &extra = "") {
  std::string out("KILNART\0", 8);
  putLe(out, raw.version, 4);
  putLe(out, raw.buckets.size(), 4);
  putLe(out, raw.objects.size(), 4);
  putLe(out, raw.reserved, 4);
  putLe(out, raw.manifest.size(), 8);
  out += raw.manifest;
  for (const auto *list : {&raw.buckets, &raw.objects})
    for (const std::string &s : *list) {
      putLe(out, s.size(), 8);
      out += s;
    }
  out += extra;
  const cache::Sha256::Digest sum = cache::sha256(out);
  out.append(reinterpret_cast<const char *>(sum.data()), sum.size());
  return out;
}

std::string assemble(const RawArtifact &raw) { return signedBy(*suite_key, assembleUnsigned(raw)); }

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

// Decodes the artifact with its manifest edited by `edit`.
std::string withManifest(const std::string &bytes, const std::function<void(json &)> &edit) {
  RawArtifact raw = split(bytes);
  json m = json::parse(raw.manifest);
  edit(m);
  raw.manifest = m.dump();
  return assemble(raw);
}
std::string withBucket(const std::string &bytes, size_t bucket,
                       const std::function<void(json &)> &edit) {
  RawArtifact raw = split(bytes);
  json b = json::parse(raw.buckets[bucket]);
  edit(b);
  raw.buckets[bucket] = b.dump();
  return assemble(raw);
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

// ---------------------------------------------------------------------------
// Loading: this kiln and host, and the kernels' keys.

TEST_F(ArtifactFormat, LoadsWithoutCompilingAndRunsAsCompiled) {
  Artifact a = decoded();
  EXPECT_TRUE(checkCompatible(a)) << checkCompatible(a).message();
  auto bucket = selectBucket(a, 8);
  ASSERT_TRUE(bucket) << bucket.message();
  auto loaded = loadBucket(a, **bucket);
  ASSERT_TRUE(loaded) << loaded.message();
  EXPECT_EQ(loaded->kernels.stats.compiled, 0);
  ASSERT_EQ(loaded->kernels.kernels.size(), compiled_->kernels8.kernels.size());
  for (size_t i = 0; i < loaded->kernels.kernels.size(); ++i) {
    EXPECT_EQ(loaded->kernels.kernels[i].key, compiled_->kernels8.kernels[i].key);
    EXPECT_EQ(loaded->kernels.kernels[i].symbol, compiled_->kernels8.kernels[i].symbol);
  }
  EXPECT_EQ(loaded->kernels.objects.size(), compiled_->kernels8.objects.size());

  const ops::TensorMap inputs = testing::randomInputs(loaded->graph, 5, -0.1f, 0.1f);
  auto from_artifact = runtime::Executor::create(loaded->graph, std::move(loaded->kernels));
  ASSERT_TRUE(from_artifact) << from_artifact.message();
  auto got = (*from_artifact)->run(inputs);
  ASSERT_TRUE(got) << got.message();
  auto fresh = runtime::Executor::create(compiled_->graph8, compiled_->kernels8);
  ASSERT_TRUE(fresh) << fresh.message();
  auto want = (*fresh)->run(inputs);
  ASSERT_TRUE(want) << want.message();
  ASSERT_EQ(got->size(), want->size());
  for (const auto &[name, t] : *want)
    EXPECT_TRUE(got->at(name) == t) << name << " differs from the freshly compiled run";
}

TEST_F(ArtifactFormat, SelectBucketListsTheSeqsThereAre) {
  Artifact a = decoded();
  auto b = selectBucket(a, 12);
  ASSERT_FALSE(b);
  EXPECT_HAS(b.message(), "job.kiln: no bucket for seq 12");
  EXPECT_HAS(b.message(), "8, 16");
}

TEST_F(ArtifactFormat, RefusesAnotherKilnVersion) {
  Artifact a = decoded();
  a.manifest.kiln_version = "0.0.1";
  Status s = checkCompatible(a);
  ASSERT_FALSE(s);
  EXPECT_HAS(s.message(), "job.kiln: compiled for another kiln or host");
  EXPECT_HAS(s.message(), "kiln version 0.0.1 (this is kiln " + thisKilnVersion() + ")");
  EXPECT_HAS(s.message(), "recompile it with this kiln: kiln compile " + kTiny);
  EXPECT_HAS(s.message(), "--seq 8,16");
  EXPECT_HAS(s.message(), "-o job.kiln");
  EXPECT_FALSE(loadBucket(a, a.buckets[0]));
}

TEST_F(ArtifactFormat, RefusesAnotherHost) {
  Artifact a = decoded();
  a.manifest.host.features += ",+kilnfakefeature";
  Status s = checkCompatible(a);
  ASSERT_FALSE(s);
  EXPECT_HAS(s.message(),
             "host CPU features: compiled with kilnfakefeature, which this host lacks");
  a = decoded();
  a.manifest.host.cpu = "pentium4";
  s = checkCompatible(a);
  ASSERT_FALSE(s);
  EXPECT_HAS(s.message(), "host CPU pentium4");
  a = decoded();
  a.manifest.llvm_version = "3.4";
  s = checkCompatible(a);
  ASSERT_FALSE(s);
  EXPECT_HAS(s.message(), "LLVM 3.4");
  // The same, through the file: the check runs on what was read.
  std::string e =
      loadBucket(
          *decodeArtifact(withManifest(bytes(), [](json &m) { m["host"]["cpu"] = "pentium4"; }),
                          "job.kiln"),
          a.buckets[0])
          .message();
  EXPECT_HAS(e, "host CPU pentium4");
}

TEST_F(ArtifactFormat, RefusesOtherCodeGenerationSources) {
  Artifact a = decoded();
  a.manifest.kiln_source_hash = std::string(64, '0');
  Status s = checkCompatible(a);
  ASSERT_FALSE(s);
  EXPECT_HAS(s.message(), "code-generation sources (source hash 000000000000");
}

TEST_F(ArtifactFormat, RefusesKernelsWhoseKeysThisKilnDoesNotReproduce) {
  // An object compiled under other code-generation sources (its source-hash
  // part differs), with the manifest otherwise matching: only the key shows it.
  Artifact a = decoded();
  const int object = a.buckets[0].kernels[5].object;
  const std::string other_key(64, 'e');
  for (Bucket &b : a.buckets)
    for (PlannedKernel &k : b.kernels)
      if (k.object == object)
        k.key = other_key;
  a.objects[object].key = other_key;
  for (auto &[part, hex] : a.objects[object].parts)
    if (part == "kiln_source_hash")
      hex = std::string(64, '1');
  // Still a well-formed file.
  auto reread = decodeArtifact(encode(a), "job.kiln");
  ASSERT_TRUE(reread) << reread.message();
  auto loaded = loadBucket(*reread, reread->buckets[0]);
  ASSERT_FALSE(loaded);
  EXPECT_HAS(loaded.message(), "job.kiln: bucket seq 8: kernel '" + a.buckets[0].kernels[5].name +
                                   "': the key this kiln computes differs from the stored one "
                                   "(kiln_source_hash changed)");
  EXPECT_HAS(loaded.message(), "recompile it with this kiln");
}

TEST_F(ArtifactFormat, InspectSaysWhatItHoldsAndWhetherItRunsHere) {
  Artifact a = decoded();
  json s = summarizeArtifact(a, bytes().size(), 3);
  EXPECT_EQ(s["runs_here"], true);
  EXPECT_EQ(s["bytes"], bytes().size());
  ASSERT_EQ(s["buckets"].size(), 2u);
  EXPECT_EQ(s["buckets"][0]["kernels"].size(), a.buckets[0].kernels.size());
  EXPECT_EQ(s["buckets"][0]["groups"].size(), a.buckets[0].graph.groups().size());
  EXPECT_EQ(s["buckets"][0]["memory"]["largest"].size(), 3u);
  EXPECT_EQ(s["buckets"][0]["memory"]["peak_bytes"], a.buckets[0].memory.peak_bytes);
  std::string text = summaryToText(s);
  EXPECT_HAS(text, "runs here   yes");
  EXPECT_HAS(text, "bucket seq 8 (batch 1)");
  EXPECT_HAS(text, a.buckets[0].kernels[0].key.substr(0, 12));
  EXPECT_HAS(text, "memory plan: peak");

  a.manifest.kiln_version = "0.0.1";
  s = summarizeArtifact(a, bytes().size());
  EXPECT_EQ(s["runs_here"], false);
  EXPECT_HAS(summaryToText(s), "runs here   no: job.kiln: compiled for another kiln or host");
}

TEST_F(ArtifactFormat, RefusesAPlanThatIsNotTheGraphsPartition) {
  Artifact a = decoded();
  a.buckets[0].kernels.pop_back();
  auto loaded = loadBucket(a, a.buckets[0]);
  ASSERT_FALSE(loaded);
  EXPECT_HAS(loaded.message(), "the plan lists");
}

} // namespace
} // namespace kiln::artifact
