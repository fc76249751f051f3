// Loading an artifact: it runs as compiled without compiling, and the loader
// refuses one built by another kiln, host or code generator, or whose
// kernels' keys or partition this kiln does not reproduce.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_loader.h"
#include "compiler/artifact/artifact_summary.h"
#include "runtime/executor.h"
#include "tests/compiler/artifact_test_util.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::artifact {
namespace {

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
