// What kiln refuses to trust, through the command line: kernel-cache entries
// another user could have written (owned by someone else, writable by group
// or others) or that fail their checksum are evicted and recompiled, never
// loaded; names read from files (an artifact's custom-op file names, node
// and kernel names, tensor names) never lead out of the folder kiln writes
// into; a repro folder with a symbolic link inside is refused before kiln
// deletes through it. Every bad input is a clear error, never a signal.
#include <functional>
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/artifact/artifact.h"
#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class SecurityCli : public Cli {
protected:
  std::string compile(const std::string &out) {
    return "compile " + kTiny + " --seq 8 --cache-dir " + path("cache") + " -o " + path(out);
  }
  // The kernel entries (.kce), or with `programs` the program entries (.kpe) too.
  std::vector<fs::path> entries(bool programs = false) const {
    std::vector<fs::path> found;
    for (const auto &e : fs::recursive_directory_iterator(dir_ / "cache" / "entries"))
      if (e.is_regular_file() &&
          (e.path().extension() == ".kce" || (programs && e.path().extension() == ".kpe")))
        found.push_back(e.path());
    std::sort(found.begin(), found.end());
    return found;
  }
  static fs::perms modeOf(const fs::path &p) {
    return fs::status(p).permissions() & fs::perms::mask;
  }
  // Copies examples/debug here once and names "normed", the node whose
  // kernel the example's rule cannot fit, `name` in its graph; its output
  // value goes by its name.
  void renameTheFailingNode(const std::string &name) {
    if (!fs::exists(dir_ / "debug"))
      fs::copy(kSource + "/examples/debug", dir_ / "debug", fs::copy_options::recursive);
    const std::string graph_file = path("debug/graph.json");
    if (original_graph_.is_null())
      original_graph_ = json::parse(slurp(graph_file));
    json graph = original_graph_;
    for (json &node : graph["nodes"]) {
      if (node["name"] == "normed")
        node["name"] = name;
      for (json &input : node["inputs"])
        if (input == "normed")
          input = name;
    }
    for (json &output : graph["outputs"])
      if (output["value"] == "normed")
        output["value"] = name;
    std::ofstream(graph_file, std::ios::trunc) << graph.dump(1);
  }
  json original_graph_;
};

TEST_F(SecurityCli, TheCacheDirectoryIsCreated0700) {
  ASSERT_EQ(run(compile("job.kiln")).exit_code, 0);
  for (const fs::path &d : {dir_ / "cache", dir_ / "cache" / "entries"})
    EXPECT_EQ(modeOf(d), fs::perms::owner_all) << d;
  for (const fs::path &e : entries(/*programs=*/true))
    EXPECT_EQ(modeOf(e.parent_path()), fs::perms::owner_all) << e.parent_path();
  // Every missing folder of the path, not only the last.
  Result r = run("cache stats --cache-dir " + path("new/deeper/cache"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char *d : {"new", "new/deeper", "new/deeper/cache"})
    EXPECT_EQ(modeOf(path(d)), fs::perms::owner_all) << d;
}

// Each way an entry becomes untrustworthy, on its own entry: the next
// compile warns, evicts it, compiles that kernel again and stores it afresh
// (the current user's, not writable by others), and the artifact is the one
// an untouched cache gives.
TEST_F(SecurityCli, UntrustedEntriesAreRecompiledNeverLoaded) {
  ::setenv("SOURCE_DATE_EPOCH", "1800000000", 1);
  ASSERT_EQ(run(compile("first.kiln")).exit_code, 0);
  const std::string want = slurp(path("first.kiln"));
  const std::vector<fs::path> all = entries();
  ASSERT_GE(all.size(), 4u);

  struct Case {
    std::string what, reason;
    std::function<void(const fs::path &)> spoil;
  };
  const bool root = ::geteuid() == 0;
  std::vector<Case> cases = {
      {"world-writable", "writable by group or others",
       [](const fs::path &p) {
         fs::permissions(p, fs::perms::others_write, fs::perm_options::add);
       }},
      {"group-writable", "writable by group or others",
       [](const fs::path &p) {
         fs::permissions(p, fs::perms::group_write, fs::perm_options::add);
       }},
      {"corrupt", "authentication failed",
       [](const fs::path &p) {
         std::string bytes = slurp(p);
         bytes[bytes.size() / 2] ^= 0x20;
         std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
       }},
  };
  if (root) // tests run as root in CI: give the entry to nobody
    cases.push_back({"owned by nobody", "owned by uid 65534, not by the current user",
                     [](const fs::path &p) { ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0); }});
  else
    std::cout << "not root: the other-owner case needs chown and is left out\n";

  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    SCOPED_TRACE(c.what);
    const fs::path entry = all[i];
    c.spoil(entry);
    const std::string out = "again" + std::to_string(i) + ".kiln";
    Result r = run(compile(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("kiln: warning: kernel cache: evicting bad entry " + entry.string() +
                         ": " + c.reason),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.out.find(", 1 compiled,"), std::string::npos) << "recompiled: " << r.out;
    EXPECT_TRUE(slurp(path(out)) == want) << "the artifact differs";
    struct stat st {};
    ASSERT_EQ(::stat(entry.c_str(), &st), 0) << "stored again";
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_mode & (S_IWGRP | S_IWOTH), 0u);

    // kiln cache verify finds the same and evicts it.
    c.spoil(entry);
    Result verify = run("cache verify --cache-dir " + path("cache"));
    EXPECT_EQ(verify.exit_code, 1) << verify.out;
    EXPECT_NE(verify.out.find(entry.string() + ": " + c.reason), std::string::npos) << verify.out;
    EXPECT_FALSE(fs::exists(entry));
    ASSERT_EQ(run(compile(out)).exit_code, 0);
  }
  ::unsetenv("SOURCE_DATE_EPOCH");
  EXPECT_EQ(run("cache verify --cache-dir " + path("cache")).exit_code, 0);
}

// An artifact stores its custom-op files by file name; one naming anything
// else was not written by kiln and is refused, by inspect and by run.
TEST_F(SecurityCli, AnArtifactsCustomOpNamesCannotLeaveTheirFolder) {
  const std::string example = kSource + "/examples/custom-ops";
  const std::string model = example + "/graph.json --job " + example + "/job.json";
  ASSERT_EQ(run("init " + model + " -o w.st").exit_code, 0);
  ASSERT_EQ(run("make-inputs " + model + " -o in.st").exit_code, 0);
  Result compiled = run("compile " + model + " --dtype f32 -o ops.kiln");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  auto artifact = artifact::readArtifact(path("ops.kiln"));
  ASSERT_TRUE(artifact.isOk()) << artifact.message();
  ASSERT_EQ(artifact->custom_ops.size(), 1u);

  const std::vector<std::pair<std::string, std::string>> names = {
      {"../ops.xml", "names a folder ('/')"},
      {"../../../../etc/ops.xml", "names a folder ('/')"},
      {"/etc/ops.xml", "is an absolute path"},
      {std::string("ops.xml\0../../x", 15), "contains a NUL byte"},
      {"..", "names a folder ('..')"},
      {"", "is empty"},
  };
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(i);
    artifact::Artifact bad = *artifact;
    bad.custom_ops[0].path = names[i].first;
    const std::string file = "bad" + std::to_string(i) + ".kiln";
    // Signed by this test's own key (its KILN_CONFIG_DIR), as a compile would.
    ::setenv("KILN_CONFIG_DIR", path("config").c_str(), 1);
    auto key = artifact::SigningKey::loadOrCreate();
    ASSERT_TRUE(key.isOk()) << key.message();
    ASSERT_TRUE(artifact::writeArtifact(path(file), bad, *key).isOk());
    expectRunError(run("inspect " + file), {file, "custom_ops[0]", names[i].second});
    expectRunError(run("run " + file + " --weights w.st --inputs in.st --outputs o.st"),
                   {file, "custom_ops[0]", names[i].second});
    EXPECT_FALSE(fs::exists(path("o.st")));
  }
}

// A node's name becomes the name of the kernel IR dump of a kernel that
// cannot be built; whatever the graph file calls it, the dump stays in the
// dump folder.
TEST_F(SecurityCli, NodeNamesInDumpFileNamesStayInTheDumpFolder) {
  for (const std::string &name : std::vector<std::string>{
           "../../../escaped", "/tmp/escaped", std::string("a\0/../../escaped", 16), ".."}) {
    SCOPED_TRACE(name);
    renameTheFailingNode(name);
    fs::remove_all(dir_ / "kiln_dump");
    Result r = run("compile debug/graph.json --job debug/job.json --training");
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    if (r.err.find("E40001") == std::string::npos) {
      // A name the graph reader refuses is refused with the file's name.
      EXPECT_NE(r.err.find("debug/graph.json"), std::string::npos) << r.err;
      continue;
    }
    const size_t at = r.err.find("kernel IR: kiln_dump/");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string dump = r.err.substr(at + 11, r.err.find_first_of(" \n)", at + 11) - at - 11);
    EXPECT_EQ(dump.find('/', 10), std::string::npos) << dump;
    EXPECT_TRUE(fs::is_regular_file(path(dump))) << dump;
    size_t files = 0;
    for (const auto &e : fs::recursive_directory_iterator(dir_ / "kiln_dump"))
      files += e.is_regular_file();
    EXPECT_EQ(files, 1u);
  }
  EXPECT_FALSE(fs::exists("/tmp/escaped.txt"));
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "escaped"));
}

// kiln debug reduce empties the repro's copies of the job's folders before
// filling them; through a symbolic link that would delete files elsewhere.
TEST_F(SecurityCli, AReproFolderWithASymbolicLinkIsRefused) {
  const std::string example = kSource + "/examples/debug";
  fs::create_directories(dir_ / "elsewhere" / "0");
  write("elsewhere/0/precious.xml", "<keep/>");
  fs::create_directories(dir_ / "repro");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "repro" / "custom_ops");
  Result r = run("debug reduce " + example + "/graph.json --job " + example +
                 "/job.json --training -o repro");
  expectRunError(r, {"repro", "custom_ops", "symbolic link"});
  EXPECT_EQ(slurp(path("elsewhere/0/precious.xml")), "<keep/>");
}

// Tensor names are keys, never paths; one holding a NUL byte is refused by
// the reader with the file's name.
TEST_F(SecurityCli, ATensorNameWithANulByteIsAClearError) {
  const std::string header =
      std::string(R"({"w\u0000../../x":{"dtype":"F32","shape":[1],)") + R"("data_offsets":[0,4]}})";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[i] = char((header.size() >> (8 * i)) & 0xff);
  write("nul.safetensors", file + header + std::string(4, '\0'));
  ASSERT_EQ(run("make-inputs " + kTiny + " --seq 8 -o in.st").exit_code, 0);
  expectRunError(run("run " + kTiny +
                     " --weights nul.safetensors --inputs in.st --outputs "
                     "o.st --cache-dir " +
                     path("cache")),
                 {"nul.safetensors", "NUL byte"});
}

// Names read from files reach the terminal in errors, warnings and a
// command's text output; their control characters are printed escaped,
// never sent raw, where they would clear the screen or overwrite the line.
TEST_F(SecurityCli, ControlCharactersInNamesArePrintedEscaped) {
  const std::string evil = "evil\x1b[2J\rfake\xc2\x9b";
  auto expectEscaped = [](const Result &r) {
    EXPECT_FALSE(r.signaled);
    for (const std::string raw : {"\x1b", "\r", "\xc2\x9b"})
      EXPECT_EQ(r.err.find(raw), std::string::npos) << "a raw control character: " << r.err;
    EXPECT_NE(r.err.find("evil\\x1b[2J\\x0dfake\\xc2\\x9b"), std::string::npos) << r.err;
  };

  // An error naming a node (E40001, the kernel that cannot be built).
  renameTheFailingNode(evil);
  Result error = run("compile debug/graph.json --job debug/job.json --training");
  EXPECT_EQ(error.exit_code, 1);
  expectEscaped(error);

  // A warning naming a tensor of a weights file (a tensor the model lacks).
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  auto weights = readSafetensors(path("w.safetensors"));
  ASSERT_TRUE(weights.isOk()) << weights.message();
  weights->tensors[evil] = weights->tensors.begin()->second;
  ASSERT_TRUE(writeSafetensors(path("extra.safetensors"), *weights).isOk());
  ASSERT_EQ(run("make-inputs " + kTiny + " --seq 8 -o in.st").exit_code, 0);
  Result warning = run("run " + kTiny + " --weights extra.safetensors --inputs in.st --outputs " +
                       "o.st --cache-dir " + path("cache"));
  EXPECT_EQ(warning.exit_code, 0) << warning.err;
  expectEscaped(warning);

  // A command's text output: the graph's name in compile's summary and in
  // inspect's description of the artifact.
  ASSERT_EQ(run("graph " + kTiny + " --seq 8 --format json -o " + path("g.json")).exit_code, 0);
  json graph = json::parse(slurp(path("g.json")));
  graph["name"] = evil;
  std::ofstream(path("g.json"), std::ios::trunc) << graph.dump(1);
  Result compiled = run("compile g.json -o evil.kiln --cache-dir " + path("cache"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  Result inspected = run("inspect evil.kiln");
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  for (const Result &r : {compiled, inspected}) {
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "a raw escape on stdout: " << r.out;
    EXPECT_NE(r.out.find("evil\\x1b[2J\\x0dfake\\xc2\\x9b"), std::string::npos) << r.out;
  }
}

// Inputs that used to abort kiln (an uncaught exception, SIGABRT) or to
// exhaust memory are one-line errors with exit code 1.
TEST_F(SecurityCli, EndlessOrHugeInputsAreOneLineErrors) {
  const std::string tiny = kTiny + " --batch 8 --seq 8";
  Result r = run("train " + tiny + " --data /dev/zero --steps 1");
  expectRunError(r, {"/dev/zero", "larger than"});
  ASSERT_EQ(run("make-inputs " + kTiny + " --batch 1 --seq 8 -o in.st").exit_code, 0);
  expectRunError(run("run " + kTiny + " --weights /dev/zero --inputs in.st --outputs o.st"),
                 {"/dev/zero", "larger than"});
  fs::create_symlink("/dev/zero", dir_ / "zero.kiln");
  expectRunError(run("run zero.kiln --weights w.st --inputs in.st --outputs o.st"),
                 {"zero.kiln", "larger than"});
  expectRunError(run("inspect zero.kiln"), {"zero.kiln", "larger than"});
}

TEST_F(SecurityCli, ANameThatIsNotUtf8IsAnErrorNotAnAbort) {
  const fs::path latin1 = dir_ / "caf\xe9";
  fs::create_directories(latin1);
  fs::copy_file(kTiny, latin1 / "config.json");
  Result r = run("compile '" + (latin1 / "config.json").string() + "' --seq 8 -o l1.kiln");
  expectRunError(r, {"l1.kiln", "not valid UTF-8"});
  EXPECT_FALSE(r.signaled);
  EXPECT_FALSE(fs::exists(path("l1.kiln")));
}

#if !defined(__SANITIZE_ADDRESS__)
// Under a 1.5 GB address-space limit, Qwen-14B's weights cannot be made.
TEST_F(SecurityCli, WeightsThatDoNotFitInMemoryAreOneLineErrors) {
  Result r = shell("ulimit -v 1500000 && " + kiln_ + " init " + kSource +
                   "/examples/qwen-14b/config.json -o big.st");
  expectRunError(r, {"qwen-14b/config.json", "52.8 GiB", "more memory than this machine has"});
  EXPECT_FALSE(fs::exists(path("big.st")));
}
#endif

// A FIFO where a cache entry belongs blocked kiln cache verify and list
// forever; it is not a regular file, so it is evicted and listed past.
TEST_F(SecurityCli, AFifoInTheCacheDoesNotHang) {
  ASSERT_EQ(run(compile("a.kiln")).exit_code, 0);
  const fs::path entry = entries().front();
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  Result list = shell("timeout 60 " + kiln_ + " cache list --cache-dir " + path("cache"));
  EXPECT_EQ(list.exit_code, 0) << list.err;
  Result verify = shell("timeout 60 " + kiln_ + " cache verify --cache-dir " + path("cache"));
  EXPECT_EQ(verify.exit_code, 1) << verify.err;
  EXPECT_NE(verify.out.find("not a regular file"), std::string::npos) << verify.out;
  EXPECT_FALSE(fs::exists(entry));
}

} // namespace
} // namespace kiln
