// Reading safetensors files with pread: what the reader of bytes in memory
// reads, from regular files and streams, and a file that another process
// truncates after its header was read (or at any moment while it is read)
// is an error naming the file, never a SIGBUS.
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "formats/safetensors_reader.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class SafetensorsReaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_safetensors_reader_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two f32 tensors "a" and "b" of `elements` each, written to `name`.
  std::string writeTwoTensors(const std::string &name, int64_t elements) {
    SafetensorsFile file;
    for (const char *tensor : {"a", "b"}) {
      Tensor t(TensorType{DType::F32, {elements}});
      for (int64_t k = 0; k < elements; ++k)
        t.dataAs<float>()[k] = static_cast<float>(k % 1000) + (tensor[0] == 'b' ? 0.5f : 0.0f);
      file.tensors[tensor] = std::move(t);
    }
    file.metadata["format"] = "pt";
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(writeSafetensors(path, file));
    return path;
  }

  fs::path dir_;
};

void expectErrorMentions(const Expected<SafetensorsFile> &read,
                         std::initializer_list<std::string> fragments) {
  ASSERT_FALSE(read.isOk()) << "a shrunk file was read as whole";
  for (const std::string &f : fragments)
    EXPECT_NE(read.message().find(f), std::string::npos)
        << "missing '" << f << "' in: " << read.message();
}

TEST_F(SafetensorsReaderTest, ReadsWhatTheParserOfBytesReads) {
  const std::string path = writeTwoTensors("w.safetensors", 1000);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  auto parsed = parseSafetensors(bytes, path);
  auto read = readSafetensors(path);
  ASSERT_TRUE(parsed.isOk() && read.isOk()) << read.message();
  EXPECT_EQ(read->metadata, parsed->metadata);
  ASSERT_EQ(read->tensors.size(), 2u);
  for (const auto &[name, t] : parsed->tensors)
    EXPECT_TRUE(read->tensors.at(name) == t) << name;
}

TEST_F(SafetensorsReaderTest, ReadsAStreamWhole) {
  const std::string path = writeTwoTensors("w.safetensors", 100);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ifstream in(path, std::ios::binary);
    std::ofstream(fifo, std::ios::binary) << in.rdbuf();
  });
  auto read = readSafetensors(fifo);
  writer.join();
  ASSERT_TRUE(read.isOk()) << read.message();
  EXPECT_FLOAT_EQ(read->tensors.at("b").getFloat(99), 99.5f);
}

// What SIGBUS'd when the file was mapped: the header said the tensors were
// there, then another process cut the file.
TEST_F(SafetensorsReaderTest, AFileTruncatedAfterItsHeaderWasReadIsAnError) {
  const std::string path = writeTwoTensors("w.safetensors", 4096);
  const uint64_t size = fs::file_size(path);
  for (uint64_t cut : {size - 1, size - 4096 * 4 - 100, uint64_t{4096}}) {
    SCOPED_TRACE("cut to " + std::to_string(cut) + " of " + std::to_string(size));
    auto reader = SafetensorsReader::open(path);
    ASSERT_TRUE(reader.isOk()) << reader.message();
    fs::resize_file(path, cut);
    expectErrorMentions(reader->read(), {path, "tensor '", "truncated",
                                         "had " + std::to_string(size) + " bytes when opened"});
    writeTwoTensors("w.safetensors", 4096);
  }
}

TEST_F(SafetensorsReaderTest, AFileCutAndGrownAgainWhileReadIsAnError) {
  const std::string path = writeTwoTensors("w.safetensors", 4096);
  const uint64_t size = fs::file_size(path);
  auto reader = SafetensorsReader::open(path);
  ASSERT_TRUE(reader.isOk()) << reader.message();
  fs::resize_file(path, 100);
  fs::resize_file(path, size + 8);
  expectErrorMentions(reader->read(), {path, "changed size while kiln read it"});
}

// Another thread cuts the file at whatever moment it reaches, again and
// again: each read is whole or an error naming the file; none kills the
// process (a mapped file did, at the first page past the new end).
TEST_F(SafetensorsReaderTest, AFileTruncatedWhileItIsReadNeverKillsTheReader) {
  const int64_t elements = int64_t{1} << 21; // 8 MiB a tensor
  int whole = 0, refused = 0;
  for (int round = 0; round < 12; ++round) {
    const std::string path = writeTwoTensors("w.safetensors", elements);
    std::atomic<bool> go{false};
    std::thread cutter([&] {
      while (!go.load())
        std::this_thread::yield();
      // Later each round, so some cuts land inside the tensors' bytes.
      std::this_thread::sleep_for(std::chrono::microseconds(round * 400));
      fs::resize_file(path, 4096 + round * 1000);
    });
    go = true;
    auto read = readSafetensors(path);
    cutter.join();
    if (read.isOk()) {
      ++whole;
      EXPECT_FLOAT_EQ(read->tensors.at("b").getFloat(elements - 1),
                      static_cast<float>((elements - 1) % 1000) + 0.5f);
    } else {
      ++refused;
      EXPECT_EQ(read.message().rfind(path + ": ", 0), 0u) << read.message();
    }
  }
  EXPECT_GT(refused, 0) << "no cut landed before the read ended (" << whole << " whole reads)";
}

} // namespace
} // namespace kiln
