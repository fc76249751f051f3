// Planted native code never runs. An attacker who can write the cache
// folder or an artifact, but does not hold the user's cache secret or
// signing key, replaces a kernel's object with one that defines the same
// symbol and calls system(); recomputing the SHA-256 is not enough any more:
// the cache entry fails its HMAC and is compiled again, the artifact fails
// its signature (or names a signer nobody trusts) and is refused. Each test
// checks that the payload's effect, a file it would create, is absent.
// Trust is per user: `kiln keys trust` or --trust-artifact.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "compiler/artifact/artifact_signing.h"
#include "compiler/cache/sha256.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class SigningCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    write("g.json", R"({"format": "kiln.graph", "version": 1, "name": "add",
      "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 64], "role": "data"},
                 {"name": "y", "dtype": "f32", "shape": [4, 64], "role": "param"}],
      "nodes": [{"op": "Add", "name": "z", "inputs": ["x", "y"],
                 "outputs": [{"dtype": "f32", "shape": [4, 64]}], "attrs": {}}],
      "outputs": [{"name": "z", "value": "z"}]})");
    ASSERT_EQ(run("init g.json -o w.st").exit_code, 0);
    ASSERT_EQ(run("make-inputs g.json -o in.st").exit_code, 0);
  }

  // An object defining `symbol` that runs `touch <marker>`.
  std::string plantedObject(const std::string &symbol) {
    write("planted.c", "#include <stdint.h>\n#include <stdlib.h>\nvoid " + symbol +
                           "(void **b, void *s, int64_t r0, int64_t r1, uint32_t *st) {\n"
                           "  (void)b; (void)s; (void)r0; (void)r1; (void)st;\n"
                           "  system(\"touch " +
                           path("PAYLOAD_RAN") + "\");\n}\n");
    Result cc = shell("cc -c -fPIC -O1 planted.c -o planted.o");
    EXPECT_EQ(cc.exit_code, 0) << cc.err;
    return slurp(path("planted.o"));
  }
  bool payloadRan() const { return fs::exists(dir_ / "PAYLOAD_RAN"); }
  std::string runArgs(const std::string &model) {
    return "run " + model + " --weights w.st --inputs in.st --outputs o.st";
  }
};

TEST_F(SigningCli, PlantedCodeInACacheEntryIsRecompiledNotRun) {
  ASSERT_EQ(run(runArgs("g.json") + " --cache-dir cache").exit_code, 0);
  fs::path entry;
  for (const auto &e : fs::recursive_directory_iterator(dir_ / "cache" / "entries"))
    if (e.is_regular_file())
      entry = e.path();
  ASSERT_FALSE(entry.empty());
  const std::string key = entry.stem().string();
  // The entry's grammar (cache_entry.h) with the object swapped and the
  // trailer recomputed as the old format's SHA-256: all an attacker can do.
  std::string bytes = slurp(entry);
  uint64_t meta = 0;
  for (int i = 0; i < 8; ++i)
    meta |= uint64_t(uint8_t(bytes[16 + i])) << (8 * i);
  const std::string object = plantedObject("kiln_kernel_" + key.substr(0, 32));
  std::string planted = bytes.substr(0, 24);
  for (int i = 0; i < 8; ++i)
    planted.push_back(char(uint8_t(uint64_t(object.size()) >> (8 * i))));
  planted += bytes.substr(32, meta) + object;
  const cache::Sha256::Digest sum = cache::sha256(planted);
  planted.append(reinterpret_cast<const char *>(sum.data()), sum.size());
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << planted;

  Result verify = run("cache verify --cache-dir cache");
  EXPECT_NE(verify.out.find("authentication failed"), std::string::npos) << verify.out;
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << planted;
  Result r = run(runArgs("g.json") + " --cache-dir cache");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("authentication failed"), std::string::npos) << r.err;
  EXPECT_FALSE(payloadRan());
  // An artifact compiled afterwards packs the recompiled kernel, not the plant.
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << planted;
  ASSERT_EQ(run("compile g.json --dtype f32 --cache-dir cache -o a.kiln").exit_code, 0);
  ASSERT_EQ(run(runArgs("a.kiln")).exit_code, 0);
  EXPECT_FALSE(payloadRan());
}

TEST_F(SigningCli, PlantedCodeInAnArtifactIsRefused) {
  ASSERT_EQ(run("compile g.json --dtype f32 -o a.kiln").exit_code, 0);
  auto original = artifact::readArtifact(path("a.kiln"));
  ASSERT_TRUE(original.isOk()) << original.message();
  artifact::Artifact planted = *original;
  for (artifact::ArtifactObject &o : planted.objects)
    o.code = plantedObject(o.symbol);

  // Re-signed by the attacker's own key: a signer nobody here trusts.
  auto attacker = artifact::SigningKey::generate();
  ASSERT_TRUE(attacker.isOk());
  ASSERT_TRUE(artifact::writeArtifact(path("planted.kiln"), planted, *attacker).isOk());
  Result r = run(runArgs("planted.kiln"));
  expectRunError(r, {"planted.kiln",
                     "signed by key " + artifact::keyFingerprint(attacker->publicKey()),
                     "does not trust", "kiln keys trust", "--trust-artifact"});
  EXPECT_FALSE(payloadRan());
  Result inspect = run("inspect planted.kiln");
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("NOT trusted"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("runs here   no"), std::string::npos) << inspect.out;

  // Kept the user's signature but changed the objects: the signature breaks.
  const std::string bytes = slurp(path("a.kiln"));
  auto unsigned_planted = artifact::encodeArtifact(planted, *attacker);
  ASSERT_TRUE(unsigned_planted.isOk());
  std::string forged =
      unsigned_planted->substr(0, unsigned_planted->size() - 96) + bytes.substr(bytes.size() - 96);
  write("forged.kiln", forged);
  expectRunError(run(runArgs("forged.kiln")), {"forged.kiln", "signature does not verify"});
  expectRunError(run("inspect forged.kiln"), {"forged.kiln", "signature does not verify"});
  EXPECT_FALSE(payloadRan());
  EXPECT_FALSE(fs::exists(path("o.st")));
}

// Another user's artifact: refused until trusted, by flag or for good.
TEST_F(SigningCli, AnotherUsersArtifactRunsOnceTrusted) {
  ::setenv("KILN_CONFIG_DIR", path("colleague").c_str(), 1);
  ASSERT_EQ(run("compile g.json --dtype f32 -o theirs.kiln").exit_code, 0);
  Result exported = run("keys export --name colleague -o colleague.pub");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  ::setenv("KILN_CONFIG_DIR", path("config").c_str(), 1);

  expectRunError(run(runArgs("theirs.kiln")), {"does not trust"});
  Result once = run(runArgs("theirs.kiln") + " --trust-artifact");
  EXPECT_EQ(once.exit_code, 0) << once.err;
  expectRunError(run(runArgs("theirs.kiln")), {"does not trust"});

  Result trust = run("keys trust colleague.pub");
  ASSERT_EQ(trust.exit_code, 0) << trust.err;
  Result r = run(runArgs("theirs.kiln"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Result shown = run("keys show");
  EXPECT_NE(shown.out.find("colleague"), std::string::npos) << shown.out;
  expectRunError(run("keys trust 1234"), {"1234"});
}

// The key files must be the user's alone to write.
TEST_F(SigningCli, AKeyFileOthersCanWriteIsRefused) {
  ASSERT_EQ(run("keys show").exit_code, 0);
  fs::permissions(dir_ / "config" / "signing.key", fs::perms::others_write, fs::perm_options::add);
  expectRunError(run("compile g.json --dtype f32 -o a.kiln"),
                 {"signing.key", "writable by group or others"});
}

} // namespace
} // namespace kiln
