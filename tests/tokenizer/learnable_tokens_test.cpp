// The learnable corpus on its own: each token the one before times the
// rule's multiplier plus its offset, plus noise of 0 to 3, below the
// vocabulary; two bytes a token, four past 65536 ids; the same seed the
// same file, another seed other noise.
#include "tokenizer/learnable_tokens.h"

#include <gtest/gtest.h>

namespace kiln::tokenizer {
namespace {

std::vector<int64_t> decode(const std::string &bytes, int width) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i + static_cast<size_t>(width) <= bytes.size(); i += width) {
    int64_t id = 0;
    for (int b = 0; b < width; ++b)
      id |= static_cast<int64_t>(static_cast<unsigned char>(bytes[i + b])) << (8 * b);
    ids.push_back(id);
  }
  return ids;
}

TEST(LearnableTokens, EachTokenFollowsTheRuleWithALittleNoise) {
  const TokenRule rule{7, 2};
  const std::string bytes = learnableTokenBytes(/*vocab=*/512, /*count=*/1000, /*seed=*/1, rule);
  ASSERT_EQ(tokenWidth(512), 2);
  ASSERT_EQ(bytes.size(), 2000u);
  const std::vector<int64_t> ids = decode(bytes, 2);
  EXPECT_EQ(ids.front(), 0);
  bool noisy = false;
  for (size_t i = 1; i < ids.size(); ++i) {
    ASSERT_LT(ids[i], 512);
    const int64_t noise = ((ids[i] - (ids[i - 1] * 7 + 2)) % 512 + 512) % 512;
    EXPECT_LE(noise, 3) << "token " << i;
    noisy = noisy || noise > 0;
  }
  EXPECT_TRUE(noisy);
}

TEST(LearnableTokens, WideVocabulariesTakeFourBytesAndTheSeedDecidesTheNoise) {
  EXPECT_EQ(tokenWidth(65536), 2);
  EXPECT_EQ(tokenWidth(65537), 4);
  const std::string wide = learnableTokenBytes(151936, 100, 0, {});
  ASSERT_EQ(wide.size(), 400u);
  for (int64_t id : decode(wide, 4))
    EXPECT_LT(id, 151936);
  EXPECT_EQ(learnableTokenBytes(512, 100, 5, {}), learnableTokenBytes(512, 100, 5, {}));
  EXPECT_NE(learnableTokenBytes(512, 100, 5, {}), learnableTokenBytes(512, 100, 6, {}));
}

} // namespace
} // namespace kiln::tokenizer
