// piecesAlongAxis (kernel_expr.h): a body that picks by its innermost index,
// as Concat along the last axis lowers, splits into one expression per
// range; anything else stays one piece.
#include <gtest/gtest.h>

#include "compiler/codegen/kernel_expr.h"

namespace kiln::codegen {
namespace {

ExprRef in(int buffer) { return load(buffer, ScalarType::F32, {var(0), var(1)}); }
ExprRef below(int64_t c) { return binary(BinaryOp::Lt, var(1), iconst(c)); }

TEST(ExprPieces, AConcatChainSplitsAtItsOffsets) {
  const ExprRef body = round(select(below(3), in(0), select(below(7), in(1), in(2))), DType::BF16);
  const std::vector<ExprPiece> pieces = piecesAlongAxis(body, 1, 10);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].begin, 0);
  EXPECT_EQ(pieces[0].end, 3);
  EXPECT_EQ(pieces[1].begin, 3);
  EXPECT_EQ(pieces[1].end, 7);
  EXPECT_EQ(pieces[2].begin, 7);
  EXPECT_EQ(pieces[2].end, 10);
  EXPECT_EQ(exprToString(pieces[1].body), exprToString(round(in(1), DType::BF16)));
  EXPECT_EQ(exprToString(pieces[2].body), exprToString(round(in(2), DType::BF16)));
}

TEST(ExprPieces, EmptyRangesAreSkippedAndTheLastReachesTheExtent) {
  // An input of width 0 (3 < 3 never holds) and a split past the extent.
  const ExprRef body =
      select(below(3), in(0), select(below(3), in(1), select(below(12), in(2), in(3))));
  const std::vector<ExprPiece> pieces = piecesAlongAxis(body, 1, 10);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(exprToString(pieces[0].body), exprToString(in(0)));
  EXPECT_EQ(pieces[1].begin, 3);
  EXPECT_EQ(pieces[1].end, 10);
  EXPECT_EQ(exprToString(pieces[1].body), exprToString(in(2)));
}

TEST(ExprPieces, OtherBodiesStayWhole) {
  // Picking by another axis, or not by a constant, is not a split.
  EXPECT_EQ(piecesAlongAxis(in(0) + in(1), 1, 10).size(), 1u);
  EXPECT_EQ(
      piecesAlongAxis(select(binary(BinaryOp::Lt, var(0), iconst(3)), in(0), in(1)), 1, 10).size(),
      1u);
  EXPECT_EQ(
      piecesAlongAxis(select(binary(BinaryOp::Lt, var(1), var(0)), in(0), in(1)), 1, 10).size(),
      1u);
  EXPECT_EQ(piecesAlongAxis(select(below(3), in(0), in(1)), 1, 10).size(), 2u);
}

} // namespace
} // namespace kiln::codegen
