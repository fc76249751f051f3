// Verdict: allow or forbid with a reason; checks chained with andThen stop
// at the first refusal and do not run the later ones.
#include "passes/verdict.h"

#include <gtest/gtest.h>

namespace kiln::passes {
namespace {

TEST(Verdict, TheFirstRefusalWinsAndLaterChecksDoNotRun) {
  EXPECT_TRUE(Verdict::allow());
  EXPECT_EQ(Verdict::allow().reason(), "");
  const Verdict no = Verdict::forbid("'mm' is already in fused group 'g'");
  EXPECT_FALSE(no);
  EXPECT_EQ(no.reason(), "'mm' is already in fused group 'g'");

  int ran = 0;
  auto check = [&](Verdict v) {
    return [&ran, v] {
      ++ran;
      return v;
    };
  };
  const Verdict both = Verdict::allow().andThen(check(Verdict::allow()));
  EXPECT_TRUE(both);
  EXPECT_EQ(ran, 1);
  const Verdict second = Verdict::allow().andThen(check(Verdict::forbid("not convex")));
  EXPECT_EQ(second.reason(), "not convex");
  EXPECT_EQ(ran, 2);
  const Verdict first = no.andThen(check(Verdict::forbid("not convex")));
  EXPECT_EQ(first.reason(), no.reason());
  EXPECT_EQ(ran, 2) << "a check after a refusal does not run";
}

} // namespace
} // namespace kiln::passes
