// Shared pieces of the artifact tests: the tiny model compiled at seq 8 and
// 16 once per suite (the ArtifactFormat fixture), and the raw sections of an
// artifact to tamper with and reassemble.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_builder.h"
#include "compiler/cache/sha256.h"
#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/job_json.h"

namespace kiln::artifact {

using nlohmann::json;

inline const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

inline std::string thisKilnVersion() {
  return codegen::baseKeyInputs(*target::loadTarget("ascend910b"), {}).kiln_version;
}

// ---------------------------------------------------------------------------
// The tiny model compiled at seq 8 and 16, once for the suite.

inline const SigningKey *suite_key = nullptr; // signs every artifact the suite writes

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

  inline static Compiled *compiled_ = nullptr;
};

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

inline uint64_t le(std::string_view b, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= uint64_t(uint8_t(b[at + i])) << (8 * i);
  return v;
}
inline void putLe(std::string &out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i)
    out.push_back(char(uint8_t(v >> (8 * i))));
}

inline RawArtifact split(const std::string &bytes) {
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
inline std::string signedBy(const SigningKey &key, std::string body) {
  auto signature = key.sign(body);
  EXPECT_TRUE(signature) << signature.message();
  return body + key.publicKey() + (signature ? *signature : std::string());
}

inline std::string unsigned_(const std::string &bytes) {
  return bytes.substr(0, bytes.size() - kArtifactSignatureSize);
}

// `extra` goes between the last object and the checksum.
inline std::string assembleUnsigned(const RawArtifact &raw, const std::string &extra = "") {
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

inline std::string assemble(const RawArtifact &raw) {
  return signedBy(*suite_key, assembleUnsigned(raw));
}

// Decodes the artifact with its manifest edited by `edit`.
inline std::string withManifest(const std::string &bytes, const std::function<void(json &)> &edit) {
  RawArtifact raw = split(bytes);
  json m = json::parse(raw.manifest);
  edit(m);
  raw.manifest = m.dump();
  return assemble(raw);
}
inline std::string withBucket(const std::string &bytes, size_t bucket,
                              const std::function<void(json &)> &edit) {
  RawArtifact raw = split(bytes);
  json b = json::parse(raw.buckets[bucket]);
  edit(b);
  raw.buckets[bucket] = b.dump();
  return assemble(raw);
}

} // namespace kiln::artifact
