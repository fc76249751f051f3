// Names read from files that become file names: plain names checked, any name made safe.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/file_names.h"

namespace kiln {
namespace {

TEST(FileNames, PlainFileNamesPassAndEveryEscapeIsNamed) {
  for (const char *ok : {"ops.xml", "a..b", "...", ".hidden", "name with spaces"})
    EXPECT_EQ(plainFileNameProblem(ok), "") << ok;
  EXPECT_EQ(plainFileNameProblem(""), "is empty");
  EXPECT_EQ(plainFileNameProblem("."), "names a folder ('.'), not a file");
  EXPECT_EQ(plainFileNameProblem(".."), "names a folder ('..'), not a file");
  EXPECT_EQ(plainFileNameProblem("/etc/passwd"), "is an absolute path");
  EXPECT_EQ(plainFileNameProblem("../x"), "names a folder ('/'), not a plain file name");
  EXPECT_EQ(plainFileNameProblem("a/b"), "names a folder ('/'), not a plain file name");
  EXPECT_EQ(plainFileNameProblem(std::string("a\0/../b", 7)), "contains a NUL byte");
}

TEST(FileNames, AnyNameBecomesAFileNameInItsFolder) {
  EXPECT_EQ(fileStem("h.17.attn.softmax"), "h.17.attn.softmax");
  EXPECT_EQ(fileStem("../../etc/passwd"), "_.._.._etc_passwd");
  EXPECT_EQ(fileStem("/abs"), "_abs");
  EXPECT_EQ(fileStem(".."), "_..");
  EXPECT_EQ(fileStem(""), "_");
  EXPECT_EQ(fileStem(std::string("a\0b", 3)), "a_b");
  EXPECT_EQ(fileStem(std::string(200, 'x')).size(), 80u);
  for (const std::string &name :
       std::vector<std::string>{"..", ".", "../x", "/", std::string("\0", 1)})
    EXPECT_EQ(plainFileNameProblem(fileStem(name)), "") << name;
}

} // namespace
} // namespace kiln
