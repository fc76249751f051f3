// The uneven split of the layers that evens out what each pipeline stage
// holds: the first and last stages, which also hold the embedding and the
// head, get fewer layers; a split the weights do not call for stays
// balanced.
#include "compiler/parallel/stage_split.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace kiln::parallel {
namespace {

TEST(StageSplit, TheEndStagesGiveWayToTheEmbeddingAndTheHead) {
  // Qwen-14B's shape: 40 layers of 1, an embedding and a head of 2.5 each.
  const std::vector<double> layers(40, 1.0);
  EXPECT_EQ(evenedStageLayers(layers, 2.5, 2.5, 4), (std::vector<int>{9, 11, 11, 9}));
  EXPECT_EQ(evenedStageLayers(layers, 2.5, 2.5, 2), (std::vector<int>{20, 20}));
  // Only the head: the last stage gives way, the heaviest holds 11.
  const std::vector<int> head = evenedStageLayers(layers, 0, 3, 4);
  ASSERT_EQ(head.size(), 4u);
  EXPECT_EQ(head[3], 8);
  EXPECT_EQ(*std::max_element(head.begin(), head.end()), 11);
  EXPECT_EQ(head[0] + head[1] + head[2], 32);
  // Nothing beside the layers: the balanced split, the first stages longer.
  EXPECT_EQ(evenedStageLayers(std::vector<double>(10, 1.0), 0, 0, 4),
            (std::vector<int>{3, 3, 2, 2}));
  // Every stage keeps a layer, however heavy the ends.
  EXPECT_EQ(evenedStageLayers(std::vector<double>(4, 1.0), 100, 100, 4),
            (std::vector<int>{1, 1, 1, 1}));
  EXPECT_TRUE(evenedStageLayers(std::vector<double>(3, 1.0), 0, 0, 4).empty());
}

} // namespace
} // namespace kiln::parallel
