// File I/O: whole-file reads, atomic replacement without leftovers, JSON errors with positions.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "support/file_io.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The pid of a process that has exited and been reaped.
long deadPid() {
  const pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

class FileIo : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln_file_io_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return (dir_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto &e : fs::directory_iterator(dir_))
      names.insert(e.path().filename().string());
    return names;
  }

  fs::path dir_;
};

TEST_F(FileIo, WriteThenReadBinary) {
  const std::string contents("bytes\0with\xff nul\n", 16);
  ASSERT_TRUE(writeFileAtomic(path("a.bin"), contents).isOk());
  auto read = readFile(path("a.bin"));
  ASSERT_TRUE(read.isOk()) << read.message();
  EXPECT_EQ(*read, contents);
  ASSERT_TRUE(writeFileAtomic(path("empty"), "").isOk());
  EXPECT_EQ(*readFile(path("empty")), "");
}

TEST_F(FileIo, LargerThanOneReadBuffer) {
  std::string big(300'000, 'x');
  for (size_t i = 0; i < big.size(); i += 7)
    big[i] = static_cast<char>(i % 251);
  ASSERT_TRUE(writeFileAtomic(path("big"), big).isOk());
  EXPECT_EQ(*readFile(path("big")), big);
}

TEST_F(FileIo, LeavesNoTemporaryFileBehind) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(writeFileAtomic(path("out.json"), "{" + std::to_string(i) + "}").isOk());
  EXPECT_EQ(entries(), (std::set<std::string>{"out.json"}));
  EXPECT_EQ(*readFile(path("out.json")), "{4}");
}

// What a killed writer left: its temporary file, with its pid in the name.
TEST_F(FileIo, TheNextWriteRemovesTheTemporaryOfAKilledWriter) {
  const long dead = deadPid();
  const std::string killed = temporaryPath(path("a.kiln"), dead, 0);
  const std::string running = temporaryPath(path("a.kiln"), ::getpid(), 7);
  const std::string other_file = temporaryPath(path("b.kiln"), dead, 0);
  const std::string other_host = path("a.kiln.tmp.elsewhere." + std::to_string(dead) + ".0");
  for (const std::string &p : {killed, running, other_file, other_host})
    std::ofstream(p) << "torn";
  ASSERT_TRUE(writeFileAtomic(path("a.kiln"), "whole").isOk());
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(running)) << "a running writer's temporary was removed";
  EXPECT_TRUE(fs::exists(other_file)) << "another file's temporary was removed";
  EXPECT_TRUE(fs::exists(other_host)) << "another host's temporary was removed";
}

TEST_F(FileIo, RemoveStaleTemporariesKeepsWhatIsNotATemporaryOfADeadProcess) {
  const long dead = deadPid();
  const std::vector<std::string> stale = {temporaryPath(path("step-1"), dead, 0),
                                          temporaryPath(path("step-2"), dead, 3)};
  const std::vector<std::string> kept = {
      path("step-3"),
      temporaryPath(path("other"), dead, 0),
      temporaryPath(path("step-4"), ::getpid(), 0),
      path("step-5.tmp." + std::to_string(dead) + ".0"), // no host
      temporaryPath(path("step-6"), dead, 0) + "x",
      path("step-7.tmp.")};
  for (const auto &list : {stale, kept})
    for (const std::string &p : list)
      std::ofstream(p) << "x";
  auto is_step = [](std::string_view name) { return name.rfind("step-", 0) == 0; };
  EXPECT_EQ(removeStaleTemporaries(dir_.string(), is_step), 2u);
  for (const std::string &p : stale)
    EXPECT_FALSE(fs::exists(p)) << p;
  for (const std::string &p : kept)
    EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_EQ(removeStaleTemporaries(path("no-such-folder"), is_step), 0u);
}

// Rename replaces the directory entry: a reader holding the old file keeps
// seeing the old bytes, never a truncated or half-written mix.
TEST_F(FileIo, ReplacesAtomically) {
  const std::string p = path("model.bin");
  ASSERT_TRUE(writeFileAtomic(p, "old contents").isOk());
  struct stat before {};
  ASSERT_EQ(::stat(p.c_str(), &before), 0);
  std::ifstream old_reader(p, std::ios::binary);
  ASSERT_TRUE(old_reader.is_open());

  ASSERT_TRUE(writeFileAtomic(p, "new").isOk());
  struct stat after {};
  ASSERT_EQ(::stat(p.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "the file was rewritten in place";
  std::string seen((std::istreambuf_iterator<char>(old_reader)), std::istreambuf_iterator<char>());
  EXPECT_EQ(seen, "old contents");
  EXPECT_EQ(*readFile(p), "new");
}

TEST_F(FileIo, ConcurrentWritersNeverTearTheFile) {
  const std::string p = path("shared");
  std::vector<std::string> versions;
  for (char c : {'a', 'b', 'c', 'd'})
    versions.push_back(std::string(50'000, c));
  ASSERT_TRUE(writeFileAtomic(p, versions[0]).isOk());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done) {
      auto r = readFile(p);
      if (!r.isOk() || std::find(versions.begin(), versions.end(), *r) == versions.end())
        ++torn;
    }
  });
  std::vector<std::thread> writers;
  for (const std::string &v : versions)
    writers.emplace_back([&p, &v] {
      for (int i = 0; i < 20; ++i)
        EXPECT_TRUE(writeFileAtomic(p, v).isOk());
    });
  for (auto &w : writers)
    w.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(entries(), (std::set<std::string>{"shared"}));
}

TEST_F(FileIo, WriteErrorsNameThePathAndCleanUp) {
  Status s = writeFileAtomic(path("no/such/dir/file"), "x");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(path("no/such/dir/file")), std::string::npos) << s.message();
  // Publishing over a folder fails and must not leave the temporary file.
  fs::create_directory(path("folder"));
  s = writeFileAtomic(path("folder"), "x");
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("folder"), std::string::npos) << s.message();
  EXPECT_EQ(entries(), (std::set<std::string>{"folder"}));
}

TEST_F(FileIo, ReadErrorsNameThePath) {
  auto missing = readFile(path("missing.txt"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find(path("missing.txt")), std::string::npos);
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos) << missing.message();
  // A folder is not an empty file.
  auto folder = readFile(dir_.string());
  ASSERT_FALSE(folder.isOk());
  EXPECT_NE(folder.message().find("directory"), std::string::npos) << folder.message();
}

// Resource limits: a file that never ends, or one larger than its kind can
// be, is refused when the limit is reached instead of filling memory.
TEST_F(FileIo, ReadsAtMostTheLimit) {
  ASSERT_TRUE(writeFileAtomic(path("ten"), "0123456789").isOk());
  EXPECT_EQ(*readFile(path("ten"), 10), "0123456789");
  auto over = readFile(path("ten"), 9);
  ASSERT_FALSE(over.isOk());
  EXPECT_EQ(over.message(),
            path("ten") +
                ": cannot read: larger than 9 bytes, the most kiln reads from such a file");
  // /dev/zero has no size to check up front: the limit stops the read.
  auto zero = readFile("/dev/zero", 1 << 20);
  ASSERT_FALSE(zero.isOk());
  EXPECT_NE(zero.message().find("/dev/zero: cannot read: larger than 1048576 bytes"),
            std::string::npos)
      << zero.message();
  auto json = readJsonFile("/dev/zero");
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.message().find("larger than 268435456 bytes"), std::string::npos)
      << json.message();
}

TEST_F(FileIo, ReadJsonFileReportsLineAndColumn) {
  const std::string p = path("job.json");
  // The ']' on line 3 is its 8th character.
  ASSERT_TRUE(writeFileAtomic(p, "{\n  \"a\": 1,\n  \"b\": ]\n}\n").isOk());
  auto j = readJsonFile(p);
  ASSERT_FALSE(j.isOk());
  EXPECT_EQ(j.message().rfind(p + ": invalid JSON", 0), 0u) << j.message();
  EXPECT_NE(j.message().find("line 3, column 8"), std::string::npos) << j.message();
  EXPECT_EQ(j.message().find("[json.exception"), std::string::npos) << j.message();
}

TEST_F(FileIo, ReadJsonFile) {
  const std::string p = path("ok.json");
  ASSERT_TRUE(writeFileAtomic(p, R"({"k": [1, 2.5, "s"]})").isOk());
  auto j = readJsonFile(p);
  ASSERT_TRUE(j.isOk()) << j.message();
  EXPECT_EQ((*j)["k"][1], 2.5);
  auto missing = readJsonFile(path("nope.json"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("nope.json"), std::string::npos);
}

TEST(ParseJson, ErrorsNameTheSource) {
  auto empty = parseJson("", "config.json");
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.message().rfind("config.json: invalid JSON", 0), 0u) << empty.message();
  auto trailing = parseJson("{} x", "config.json");
  ASSERT_FALSE(trailing.isOk());
  EXPECT_NE(trailing.message().find("line 1, column 4"), std::string::npos) << trailing.message();
  auto utf8 = parseJson("\"\xff\"", "config.json");
  ASSERT_FALSE(utf8.isOk());
  EXPECT_NE(utf8.message().find("config.json"), std::string::npos);
}

// Found by tests/fuzz: printing an error about a value nested 10^5 deep
// overflowed the stack. Such documents are refused while parsing.
TEST(ParseJson, RefusesNestingDeeperThanTheLimit) {
  const int deep = 100'000;
  const std::string arrays = std::string(deep, '[') + std::string(deep, ']');
  auto refused = parseJson(arrays, "config.json");
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(refused.message().rfind("config.json: invalid JSON: ", 0), 0u) << refused.message();
  EXPECT_NE(refused.message().find("deeper than 512 levels"), std::string::npos)
      << refused.message();
  std::string objects;
  for (int i = 0; i < deep; ++i)
    objects += "{\"a\":";
  objects += "1" + std::string(deep, '}');
  EXPECT_FALSE(parseJson(objects, "config.json").isOk());
  // Just under the limit is still JSON kiln reads.
  const std::string limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJson(limit, "config.json").isOk());
  const std::string over =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parseJson(over, "config.json").isOk());
}

} // namespace
} // namespace kiln
