// The whole-program cache: program keys and payloads, program entries beside
// kernel entries, and driver::compileProgram warm and cold. A warm hit gives
// the cold compile's program and artifact bytes; a changed model, setting or
// target, a tampered entry or a lost kernel entry misses and says why.
#include "compiler/driver/program_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "compiler/cache/program_key.h"
#include "compiler/driver/job_json.h"
#include "compiler/driver/program_compile.h"
#include "support/file_io.h"
#include "tests/compiler/kernel_cache_test_util.h"

namespace kiln::driver {
namespace {

namespace fs = std::filesystem;
using cache::EntryKind;
using nlohmann::json;

const std::string kTiny = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny/config.json";

std::string slurpFile(const std::string &path) {
  auto bytes = readFile(path);
  EXPECT_TRUE(bytes) << bytes.message();
  return bytes ? *bytes : "";
}

cache::ProgramKeyInputs sampleProgram() {
  cache::ProgramKeyInputs in;
  in.name = "qwen-tiny/config.json (forward)";
  in.model = R"({"hidden_size": 64})";
  in.request = "training=0;batch=1;seq=8";
  in.job = R"({"job":{"target":"ascend910b"}})";
  in.job_files = "";
  in.target = R"({"name":"ascend910b"})";
  in.host_features = "+avx2";
  in.kiln_build = "0.1.0;abc;llvm=19.1.7";
  in.codegen_options = "opt=2;overflow=infnan;on_compile_error=fail";
  return in;
}

TEST(ProgramKey, EveryPartChangesTheKeyAndTheNameDoesNot) {
  const cache::CacheKey base = cache::makeProgramKey(sampleProgram());
  EXPECT_EQ(base.kind, EntryKind::Program);
  EXPECT_TRUE(cache::isKeyHex(base.hex));
  ASSERT_EQ(base.parts.size(), cache::kProgramKeyPartNames.size());
  cache::ProgramKeyInputs renamed = sampleProgram();
  renamed.name = "elsewhere/config.json (forward)";
  EXPECT_EQ(cache::makeProgramKey(renamed).hex, base.hex);
  for (size_t i = 0; i < cache::kProgramKeyPartNames.size(); ++i) {
    cache::ProgramKeyInputs in = sampleProgram();
    std::string *const all[] = {&in.model,  &in.request,       &in.job,        &in.job_files,
                                &in.target, &in.host_features, &in.kiln_build, &in.codegen_options};
    *all[i] += " ";
    const cache::CacheKey changed = cache::makeProgramKey(in);
    EXPECT_NE(changed.hex, base.hex) << cache::kProgramKeyPartNames[i];
    for (size_t p = 0; p < changed.parts.size(); ++p)
      EXPECT_EQ(changed.parts[p].second != base.parts[p].second, p == i)
          << cache::kProgramKeyPartNames[i] << " moved " << changed.parts[p].first;
  }
}

TEST(ProgramPayload, RoundTripsAndRejectsDamage) {
  CompiledProgram p;
  p.summary.graph = "qwen";
  p.summary.nodes_before = 120;
  p.summary.nodes = 100;
  p.summary.groups = 7;
  p.summary.passes = {{"RmsNormFusionPass", 5, 5}};
  p.summary.settings = {{"keep_dtype", "keep.txt", "OpType::Softmax", {"Softmax"}, 2}};
  p.summary.kernels = 40;
  p.summary.unique_kernels = 9;
  p.report = R"({"format":"kiln.pass-report"})";
  p.bucket.seq = 8;
  p.bucket.batch = 2;
  p.bucket.kernels = 40;
  p.bucket.text = R"({"seq":8})";
  p.bucket.objects = {{std::string(64, 'a'), "kiln_kernel_a", "rms_norm", {}, "not kept"}};
  p.bucket.custom_ops = {{"my_ops.xml", "<ops/>"}};
  auto bytes = encodeProgramPayload(p);
  ASSERT_TRUE(bytes) << bytes.message();
  auto back = decodeProgramPayload(*bytes);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->summary.graph, "qwen");
  EXPECT_EQ(back->summary.nodes_before, 120);
  EXPECT_EQ(back->summary.groups, 7);
  EXPECT_EQ(back->summary.passes, p.summary.passes);
  ASSERT_EQ(back->summary.settings.size(), 1u);
  EXPECT_EQ(back->summary.settings[0].op_types, std::vector<std::string>{"Softmax"});
  EXPECT_EQ(back->summary.unique_kernels, 9);
  EXPECT_EQ(back->report, p.report);
  EXPECT_EQ(back->bucket.text, p.bucket.text);
  EXPECT_EQ(back->bucket.batch, 2);
  ASSERT_EQ(back->bucket.objects.size(), 1u);
  EXPECT_EQ(back->bucket.objects[0].symbol, "kiln_kernel_a");
  EXPECT_EQ(back->bucket.objects[0].code, "") << "code stays in the kernel entries";
  EXPECT_EQ(back->bucket.custom_ops, p.bucket.custom_ops);

  EXPECT_NE(decodeProgramPayload(bytes->substr(0, 10)).message().find("truncated"),
            std::string::npos);
  std::string short_head = *bytes;
  short_head[0] = char(0xff); // the head promises more than there is
  short_head[1] = char(0xff);
  short_head[2] = char(0xff);
  EXPECT_NE(decodeProgramPayload(short_head).message().find("truncated"), std::string::npos);
  std::string other = *bytes;
  other.replace(other.find("\"format_version\":1"), 18, "\"format_version\":9");
  EXPECT_NE(decodeProgramPayload(other).message().find("unknown program payload version 9"),
            std::string::npos);
  std::string malformed = *bytes;
  malformed.replace(malformed.find("\"graph\":\"qwen\""), 14, "\"graph\":12345_");
  EXPECT_FALSE(decodeProgramPayload(malformed));
}

class ProgramCacheTest : public cache::KernelCacheTest {
protected:
  static ResolvedJob job(const std::string &target = "ascend910b",
                         const std::vector<std::string> &disabled = {}) {
    JobSettings flags;
    flags.source = "test";
    flags.target = target;
    flags.disable_passes = disabled;
    auto resolved = resolveJob(std::nullopt, flags, DType::F16);
    EXPECT_TRUE(resolved) << resolved.message();
    return std::move(resolved).value();
  }
  ProgramRequest request(const std::string &model = kTiny) const {
    ProgramRequest r;
    r.model = {model, false, 1, 8};
    r.kernels.dir = cacheDir();
    r.kernels.explain_misses = true;
    r.kernels.dump_dir.clear();
    return r;
  }
  static ProgramCompile compile(const ProgramRequest &r, const ResolvedJob &j) {
    auto c = compileProgram(r, j);
    EXPECT_TRUE(c) << c.message();
    return c ? std::move(*c) : ProgramCompile{};
  }
  std::vector<fs::path> entryFiles(const std::string &suffix) const {
    std::vector<fs::path> found;
    for (const auto &e : fs::recursive_directory_iterator(fs::path(cacheDir()) / "entries"))
      if (e.is_regular_file() && e.path().extension() == suffix)
        found.push_back(e.path());
    return found;
  }
  static std::string why(const ProgramCompile &c) {
    return c.miss_explanations.empty() ? "" : c.miss_explanations.front();
  }
  static std::string artifactBytes(const ProgramCompile &c, const ResolvedJob &j) {
    static const artifact::SigningKey key = std::move(artifact::SigningKey::generate()).value();
    codegen::ObjectOptions object;
    object.overflow = j.overflow;
    artifact::Manifest m =
        driver::makeManifest(j, object, {kTiny, c.program.summary.graph, false, 1});
    m.created = 1800000000;
    auto bytes = artifact::encodeArtifact(m, {c.program.bucket}, key);
    EXPECT_TRUE(bytes) << bytes.message();
    return bytes ? *bytes : "";
  }
  // The report without what differs by design between runs.
  static json stable(const ProgramCompile &c) {
    auto r = c.report();
    EXPECT_TRUE(r) << r.message();
    json j = r ? *r : json();
    j.erase("program_cache");
    for (const char *counter : {"compiled", "cache_hits", "seconds"})
      j["kernels"].erase(counter);
    return j;
  }
};

TEST_F(ProgramCacheTest, WarmHitGivesTheColdProgramAndArtifactBytes) {
  const ResolvedJob j = job();
  const ProgramCompile cold = compile(request(), j);
  ASSERT_FALSE(cold.from_cache);
  ASSERT_FALSE(cold.program_key.empty());
  ASSERT_FALSE(cold.program.bucket.text.empty()) << cold.bucket_error;
  EXPECT_EQ(cold.kernel_stats.compiled, cold.kernel_stats.unique);
  EXPECT_EQ(entryFiles(".kpe").size(), 1u);

  const ProgramCompile warm = compile(request(), j);
  ASSERT_TRUE(warm.from_cache) << why(warm);
  EXPECT_FALSE(warm.graph) << "nothing was rebuilt";
  EXPECT_EQ(warm.program_key, cold.program_key);
  EXPECT_EQ(warm.kernel_stats.compiled, 0);
  EXPECT_EQ(warm.kernel_stats.cache_hits, cold.kernel_stats.unique);
  EXPECT_EQ(warm.kernel_stats.total, cold.kernel_stats.total);
  const ProgramSummary &a = cold.program.summary, &b = warm.program.summary;
  EXPECT_EQ(b.graph, a.graph);
  EXPECT_EQ(b.nodes_before, a.nodes_before);
  EXPECT_EQ(b.nodes, a.nodes);
  EXPECT_EQ(b.groups, a.groups);
  EXPECT_EQ(b.passes, a.passes);
  EXPECT_EQ(b.kernels, a.kernels);
  EXPECT_EQ(stable(warm), stable(cold));
  EXPECT_EQ(warm.report()->at("program_cache")["hit"], true);
  EXPECT_EQ(cold.report()->at("program_cache")["hit"], false);
  EXPECT_TRUE(warm.program.bucket.text == cold.program.bucket.text);
  ASSERT_EQ(warm.program.bucket.objects.size(), cold.program.bucket.objects.size());
  for (size_t i = 0; i < cold.program.bucket.objects.size(); ++i) {
    const artifact::ArtifactObject &x = cold.program.bucket.objects[i],
                                   &y = warm.program.bucket.objects[i];
    EXPECT_EQ(y.key, x.key);
    EXPECT_EQ(y.symbol, x.symbol);
    EXPECT_EQ(y.kind, x.kind);
    EXPECT_EQ(y.parts, x.parts);
    EXPECT_TRUE(y.code == x.code) << "object " << i;
  }
  auto cold_graph = cold.graphJson(), warm_graph = warm.graphJson();
  ASSERT_TRUE(cold_graph && warm_graph);
  EXPECT_TRUE(*warm_graph == *cold_graph) << "the rewritten graph differs";
  const std::string want = artifactBytes(cold, j);
  EXPECT_FALSE(want.empty());
  EXPECT_TRUE(artifactBytes(warm, j) == want) << "the artifact differs";

  auto c = cache::KernelCache::open(cacheDir());
  ASSERT_TRUE(c) << c.message();
  auto s = (*c)->stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->programs, 1u);
  EXPECT_EQ(s->entries, uint64_t(cold.kernel_stats.unique) + 1);
  EXPECT_EQ(s->program_hits, 1u);
  EXPECT_EQ(s->program_misses, 1u);
  EXPECT_EQ(s->program_stores, 1u);
}

TEST_F(ProgramCacheTest, AChangedModelSettingOrTargetMissesAndSaysWhy) {
  fs::create_directories(dir_);
  const std::string model = (dir_ / "config.json").string();
  fs::copy_file(kTiny, model);
  const ResolvedJob j = job();
  ASSERT_FALSE(compile(request(model), j).from_cache);
  ASSERT_TRUE(compile(request(model), j).from_cache);

  // The same model written differently is another file: its bytes are keyed.
  std::string text = slurpFile(model);
  std::ofstream(model, std::ios::trunc) << text << "\n";
  ProgramCompile changed = compile(request(model), j);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_NE(why(changed).find("model changed"), std::string::npos) << why(changed);
  EXPECT_NE(why(changed).find("same model and step"), std::string::npos) << why(changed);
  EXPECT_EQ(changed.kernel_stats.compiled, 0) << "its kernels are the same";
  EXPECT_TRUE(compile(request(model), j).from_cache);

  ProgramRequest longer = request(model);
  longer.model.seq = 16;
  ProgramCompile seq16 = compile(longer, j);
  EXPECT_FALSE(seq16.from_cache);
  EXPECT_NE(why(seq16).find("request changed"), std::string::npos) << why(seq16);

  const ResolvedJob off = job("ascend910b", {"RmsNormFusionPass"});
  ProgramCompile setting = compile(request(model), off);
  EXPECT_FALSE(setting.from_cache);
  EXPECT_NE(why(setting).find("job changed"), std::string::npos) << why(setting);
  EXPECT_TRUE(compile(request(model), off).from_cache);

  ProgramCompile target = compile(request(model), job("ascend910"));
  EXPECT_FALSE(target.from_cache);
  EXPECT_NE(why(target).find("target"), std::string::npos) << why(target);

  ProgramRequest fallback = request(model);
  fallback.kernels.on_compile_error = codegen::OnCompileError::Fallback;
  ProgramCompile options = compile(fallback, j);
  EXPECT_FALSE(options.from_cache);
  EXPECT_NE(why(options).find("codegen_options changed"), std::string::npos) << why(options);

  // Every one of them is kept: back to the first, it hits.
  EXPECT_TRUE(compile(request(model), j).from_cache);
}

TEST_F(ProgramCacheTest, ATamperedProgramEntryIsAWarningAndARecompile) {
  const ResolvedJob j = job();
  const ProgramCompile cold = compile(request(), j);
  const std::string want = artifactBytes(cold, j);
  const std::vector<fs::path> programs = entryFiles(".kpe");
  ASSERT_EQ(programs.size(), 1u);
  std::string bytes = slurpFile(programs[0].string());
  bytes[bytes.size() / 2] ^= 0x01; // inside the bucket's graph
  std::ofstream(programs[0], std::ios::binary | std::ios::trunc) << bytes;

  cache::LogCapture log;
  ProgramCompile again = compile(request(), j);
  EXPECT_FALSE(again.from_cache);
  EXPECT_NE(
      log.text().find("evicting bad entry " + programs[0].string() + ": authentication failed"),
      std::string::npos)
      << log.text();
  EXPECT_NE(why(again).find("the cache has no entry to compare with"), std::string::npos)
      << why(again);
  EXPECT_EQ(again.kernel_stats.compiled, 0) << "the kernels were untouched";
  EXPECT_TRUE(artifactBytes(again, j) == want);
  // Stored afresh, the user's own.
  ProgramCompile warm = compile(request(), j);
  EXPECT_TRUE(warm.from_cache) << why(warm);
  EXPECT_TRUE(artifactBytes(warm, j) == want);
}

TEST_F(ProgramCacheTest, AProgramWhoseKernelEntryIsGoneMisses) {
  const ResolvedJob j = job();
  const ProgramCompile cold = compile(request(), j);
  const std::vector<fs::path> kernels = entryFiles(".kce");
  ASSERT_FALSE(kernels.empty());
  fs::remove(kernels.front());
  ProgramCompile again = compile(request(), j);
  EXPECT_FALSE(again.from_cache);
  EXPECT_NE(why(again).find("the entry of its kernel " +
                            kernels.front().stem().string().substr(0, 12) + " ("),
            std::string::npos)
      << why(again);
  EXPECT_NE(why(again).find("is gone"), std::string::npos) << why(again);
  EXPECT_EQ(again.kernel_stats.compiled, 1);
  EXPECT_TRUE(artifactBytes(again, j) == artifactBytes(cold, j));
  EXPECT_TRUE(compile(request(), j).from_cache);
}

TEST_F(ProgramCacheTest, WatchingThePassesOrPassesOnlyBypassesIt) {
  const ResolvedJob j = job();
  ASSERT_FALSE(compile(request(), j).from_cache);
  ProgramRequest watched = request();
  std::ostringstream sink;
  watched.instrumentation.statistics = true;
  watched.instrumentation.out = &sink;
  ProgramCompile stats = compile(watched, j);
  EXPECT_FALSE(stats.from_cache);
  EXPECT_TRUE(stats.program_key.empty());
  EXPECT_NE(sink.str().find("RmsNormFusionPass"), std::string::npos) << "the passes ran";
  EXPECT_EQ(stats.kernel_stats.compiled, 0) << "kernels still come from their cache";

  ProgramRequest passes_only = request();
  passes_only.passes_only = true;
  ProgramCompile p = compile(passes_only, j);
  EXPECT_FALSE(p.from_cache);
  EXPECT_FALSE(p.has_kernels);
  EXPECT_TRUE(p.program_key.empty());
  EXPECT_EQ(entryFiles(".kpe").size(), 1u);
}

TEST_F(ProgramCacheTest, DisableStoresNothingAndForceRecompilesAndOverwrites) {
  const ResolvedJob j = job();
  ProgramRequest off = request();
  off.kernels.mode = cache::CacheMode::Disable;
  ProgramCompile disabled = compile(off, j);
  EXPECT_TRUE(disabled.program_key.empty());
  EXPECT_FALSE(fs::exists(cacheDir()));

  ASSERT_FALSE(compile(request(), j).from_cache);
  ProgramRequest force = request();
  force.kernels.mode = cache::CacheMode::Force;
  ProgramCompile forced = compile(force, j);
  EXPECT_FALSE(forced.from_cache);
  EXPECT_EQ(forced.kernel_stats.compiled, forced.kernel_stats.unique);
  EXPECT_NE(why(forced).find("--cache-mode force"), std::string::npos) << why(forced);
  EXPECT_TRUE(compile(request(), j).from_cache);
}

TEST_F(ProgramCacheTest, ProgramEntriesAreListedVerifiedAndCleanedWithTheKernels) {
  const ResolvedJob j = job();
  const ProgramCompile cold = compile(request(), j);
  auto opened = cache::KernelCache::open(cacheDir());
  ASSERT_TRUE(opened) << opened.message();
  cache::KernelCache &c = **opened;
  auto list = c.list();
  ASSERT_TRUE(list);
  size_t programs = 0;
  for (const cache::EntryInfo &e : *list)
    if (e.kind == EntryKind::Program) {
      ++programs;
      EXPECT_EQ(e.key, cold.program_key);
      EXPECT_EQ(e.kernel_name, kTiny + " (forward)");
    }
  EXPECT_EQ(programs, 1u);
  auto verified = c.verify();
  ASSERT_TRUE(verified);
  EXPECT_EQ(verified->checked, uint64_t(cold.kernel_stats.unique) + 1);
  EXPECT_TRUE(verified->ok());

  // A program entry where a kernel's belongs (renamed .kce) is refused and evicted.
  const fs::path program = entryFiles(".kpe").front();
  const fs::path as_kernel = fs::path(program).replace_extension(".kce");
  fs::copy_file(program, as_kernel);
  cache::CacheKey kernel_key;
  kernel_key.hex = program.stem().string();
  cache::LogCapture log;
  EXPECT_FALSE(c.lookup(kernel_key));
  EXPECT_NE(log.text().find("holds a program entry where a kernel entry belongs"),
            std::string::npos)
      << log.text();
  EXPECT_FALSE(fs::exists(as_kernel));

  auto removed = c.clean();
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, uint64_t(cold.kernel_stats.unique) + 1);
  EXPECT_TRUE(entryFiles(".kpe").empty());
  EXPECT_FALSE(compile(request(), j).from_cache);
}

} // namespace
} // namespace kiln::driver
