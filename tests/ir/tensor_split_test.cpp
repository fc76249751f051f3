// Tensor-parallel splits: the pieces each rank takes, and joining them back.
#include "ir/tensor_split.h"

#include <numeric>

#include <gtest/gtest.h>

namespace kiln {
namespace {

Tensor iota(DType dtype, Shape shape) {
  std::vector<float> v(static_cast<size_t>(numElements(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::fromFloats(dtype, std::move(shape), v);
}

std::vector<float> floats(const Tensor &t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numElements(); ++i)
    v.push_back(t.getFloat(i));
  return v;
}

TEST(TensorSplit, RowsColumnsAndBlocks) {
  const Tensor w = iota(DType::F32, {6, 2}); // rows 0..5, two columns each
  // Rows over 2 ranks: rank 1 holds rows 3..5.
  EXPECT_EQ(floats(takeShard(w, {0}, 1, 2)), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  // Columns over 2 ranks: rank 0 holds column 0.
  EXPECT_EQ(floats(takeShard(w, {1}, 0, 2)), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  // Rows as 3 blocks (q, k, v) over 2 ranks: rank 1 holds the second row of
  // every block.
  EXPECT_EQ(floats(takeShard(w, {0, 3}, 1, 2)), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  // Replicated: all of it.
  EXPECT_TRUE(takeShard(w, {}, 1, 2) == w);
}

TEST(TensorSplit, JoiningThePiecesGivesTheWholeBack) {
  for (DType dtype : {DType::F32, DType::F16}) {
    const Tensor w = iota(dtype, {12, 4, 3});
    for (TensorSplit split :
         {TensorSplit{0}, TensorSplit{1}, TensorSplit{2, 1}, TensorSplit{0, 3}, TensorSplit{1, 2}})
      for (int ranks : {1, 2}) {
        if (!splitShape(w.shape(), split, ranks))
          continue;
        std::vector<Tensor> pieces;
        for (int r = 0; r < ranks; ++r)
          pieces.push_back(takeShard(w, split, r, ranks));
        EXPECT_TRUE(joinShards(pieces, split) == w) << split.toString() << " over " << ranks;
      }
  }
}

TEST(TensorSplit, ShapesThatDoNotDivideAreAnError) {
  auto ok = splitShape({12, 4}, {0, 3}, 4);
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(*ok, (Shape{3, 4}));
  auto bad = splitShape({12, 4}, {1}, 3);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("4 is not a multiple of 3"), std::string::npos) << bad.message();
  EXPECT_FALSE(splitShape({12}, {1}, 2).isOk());
  EXPECT_EQ(TensorSplit({0, 3}).toString(), "axis 0 in 3 blocks");
  EXPECT_EQ(TensorSplit{}.toString(), "replicated");
}

// A vocabulary the ranks do not divide: padded with zero rows to a
// multiple of 128 x ranks, the padding in the last pieces, dropped again
// when the pieces are joined; one the ranks divide is cut as it is.
TEST(TensorSplit, AVocabularyTheRanksDoNotDivideIsPaddedAndJoinedWithoutIt) {
  EXPECT_EQ(paddedLength(1000, 3), 1152);
  EXPECT_EQ(paddedLength(1000, 4), 1000);
  EXPECT_EQ(paddedLength(151936, 3), 152064);
  EXPECT_EQ(paddedLength(7, 1), 7);
  const TensorSplit vocab{0, 1, 1000};
  EXPECT_EQ(vocab.toString(), "axis 0 padded from 1000");
  const Tensor w = iota(DType::F16, {1000, 2});
  auto piece = splitShape(w.shape(), vocab, 3);
  ASSERT_TRUE(piece.isOk()) << piece.message();
  EXPECT_EQ(*piece, (Shape{384, 2}));
  EXPECT_EQ(joinedShape(*piece, vocab, 3), (Shape{1000, 2}));
  std::vector<Tensor> pieces;
  for (int r = 0; r < 3; ++r)
    pieces.push_back(takeShard(w, vocab, r, 3));
  EXPECT_EQ(pieces[2].getFloat(0), w.getFloat(768 * 2)); // rank 2 starts at row 768
  EXPECT_EQ(pieces[2].getFloat((999 - 768) * 2 + 1), w.getFloat(999 * 2 + 1));
  for (int64_t i = (1000 - 768) * 2; i < 384 * 2; ++i)
    ASSERT_EQ(pieces[2].getFloat(i), 0.0f) << "padding element " << i;
  EXPECT_TRUE(joinShards(pieces, vocab) == w);
  // Divided evenly: no padding.
  EXPECT_EQ(*splitShape(w.shape(), vocab, 4), (Shape{250, 2}));
  std::vector<Tensor> four;
  for (int r = 0; r < 4; ++r)
    four.push_back(takeShard(w, vocab, r, 4));
  EXPECT_TRUE(joinShards(four, vocab) == w);
}

// Two key/value heads (rows of 2) over 4 ranks: ranks 0 and 1 hold head 0,
// ranks 2 and 3 head 1; joined, the first copy of each. Over 2 ranks or
// fewer, an ordinary split; over 3, an error.
TEST(TensorSplit, UnitsFewerThanTheRanksAreReplicated) {
  const TensorSplit heads{0, 1, 0, 2};
  EXPECT_EQ(heads.toString(), "axis 0 in 2 units");
  const Tensor w = iota(DType::F32, {4, 3});
  auto piece = splitShape(w.shape(), heads, 4);
  ASSERT_TRUE(piece.isOk()) << piece.message();
  EXPECT_EQ(*piece, (Shape{2, 3}));
  EXPECT_EQ(joinedShape(*piece, heads, 4), (Shape{4, 3}));
  EXPECT_EQ(heads.copies(4), 2);
  EXPECT_EQ(heads.copies(2), 1);
  std::vector<Tensor> pieces;
  for (int r = 0; r < 4; ++r)
    pieces.push_back(takeShard(w, heads, r, 4));
  EXPECT_EQ(floats(pieces[1]), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(floats(pieces[2]), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(pieces[0] == pieces[1] && pieces[2] == pieces[3]);
  EXPECT_TRUE(heads.firstCopy(2, 4));
  EXPECT_FALSE(heads.firstCopy(3, 4));
  pieces[1] = Tensor(pieces[1].type()); // a later copy is not read
  EXPECT_TRUE(joinShards(pieces, heads) == w);
  EXPECT_EQ(floats(takeShard(w, heads, 1, 2)), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  auto bad = splitShape(w.shape(), heads, 3);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("more ranks than units"), std::string::npos) << bad.message();
}

// ZeRO-3's slices: ceil(n / ranks) elements each, the last padded with
// zeros; joined in rank order they give the tensor back.
TEST(FlatSlices, EqualSlicesPaddedAndJoinedBack) {
  Tensor whole(TensorType{DType::F16, {2, 5}});
  for (int64_t i = 0; i < 10; ++i)
    whole.setFloat(i, static_cast<float>(i + 1), OverflowMode::InfNan);
  EXPECT_EQ(flatSliceElements(10, 4), 3);
  std::vector<Tensor> slices;
  for (int r = 0; r < 4; ++r) {
    slices.push_back(takeFlatSlice(whole, r, 4));
    EXPECT_EQ(slices.back().type(), (TensorType{DType::F16, {3}}));
  }
  EXPECT_EQ(slices[1].getFloat(0), 4.0f);
  EXPECT_EQ(slices[3].getFloat(0), 10.0f);
  EXPECT_EQ(slices[3].getFloat(1), 0.0f) << "padding";
  EXPECT_EQ(slices[3].getFloat(2), 0.0f);
  EXPECT_TRUE(joinFlatSlices(slices, whole.type()) == whole);
  // More ranks than elements: some slices are all padding.
  EXPECT_EQ(flatSliceElements(3, 8), 1);
  EXPECT_EQ(takeFlatSlice(whole, 7, 16).getFloat(0), 8.0f);
  EXPECT_EQ(takeFlatSlice(whole, 12, 16).getFloat(0), 0.0f);
}

} // namespace
} // namespace kiln
