// The kernel expression IR: what one element of a kernel's value is, as a
// scalar expression over the element's indices (TVM's tensor expressions,
// reduced to what kiln's ops need).
//
// A kernel program is a list of stages; stage s defines a tensor of `shape`
// whose element at indices (i0, ..., iN-1) is `body` evaluated with
// Var(d) = i_d. Bodies read kernel inputs and earlier stages through Load and
// may contain reductions (Reduce over a reduction variable RVar). Only stages
// that contain a reduction are materialised (held in the kernel's scratch
// memory, one row at a time); every other stage is inlined into its readers,
// which is how elementwise chains fuse.
//
// Arithmetic on floats is f32 (the vector unit's), integers are i64, and
// predicates are i1; storage dtypes (f16, bf16, i32, bool) appear only at
// loads, stores and Round.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln::codegen {

enum class ScalarType : uint8_t { F32, I64, Bool };
ScalarType scalarTypeOf(DType dtype);
std::string_view scalarTypeName(ScalarType type);

enum class ExprKind : uint8_t {
  FConst,  // f32 constant
  IConst,  // i64 (or i1) constant
  Var,     // index `var` of the stage being evaluated
  RVar,    // reduction variable `var`
  Load,    // buffer `buffer` at operands (one i64 index per axis)
  Unary,   // op(operands[0])
  Binary,  // op(operands[0], operands[1]); comparisons give Bool
  Select,  // operands[0] ? operands[1] : operands[2]
  Convert, // operands[0] to `type`: int <-> float like Cast (trunc, saturating, NaN -> 0)
  Round,   // f32 operands[0] rounded to the storage dtype `dtype` (overflow mode of the kernel)
  Reduce,  // reduce_op over RVar(var) in [0, extent) of operands[0]
};

enum class UnaryOp : uint8_t { Neg, Exp, Log, Sqrt, Cos, Sin, Abs, Not };
enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Pow,
  Rem, // arithmetic (Rem: integers only)
  And,
  Or, // Bool
  Lt,
  Le,
  Eq,
  Ne,
  Gt,
  Ge, // comparisons
};
enum class ReduceOp : uint8_t { Sum, Max, Min };

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind;
  ScalarType type;
  double fvalue = 0;  // FConst
  int64_t ivalue = 0; // IConst
  int var = 0;        // Var: axis; RVar and Reduce: the reduction variable's id
  int buffer = -1;    // Load
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  ReduceOp reduce = ReduceOp::Sum;
  DType dtype = DType::F32; // Round
  int64_t extent = 0;       // Reduce
  std::vector<ExprRef> operands;
};

// Builders. Arithmetic between an f32 and an i64 operand is an error caught
// by assertions: lowerings convert explicitly.
ExprRef fconst(double value);
ExprRef iconst(int64_t value);
ExprRef bconst(bool value);
ExprRef var(int axis);
ExprRef rvar(int id);
ExprRef load(int buffer, ScalarType type, std::vector<ExprRef> indices);
ExprRef unary(UnaryOp op, ExprRef x);
ExprRef binary(BinaryOp op, ExprRef a, ExprRef b);
ExprRef select(ExprRef cond, ExprRef a, ExprRef b);
ExprRef convert(ExprRef x, ScalarType to);
ExprRef round(ExprRef x, DType dtype);
ExprRef reduce(ReduceOp op, int rvar_id, int64_t extent, ExprRef body);

// Operators for readable lowerings.
inline ExprRef operator+(ExprRef a, ExprRef b) { return binary(BinaryOp::Add, a, b); }
inline ExprRef operator-(ExprRef a, ExprRef b) { return binary(BinaryOp::Sub, a, b); }
inline ExprRef operator*(ExprRef a, ExprRef b) { return binary(BinaryOp::Mul, a, b); }
inline ExprRef operator/(ExprRef a, ExprRef b) { return binary(BinaryOp::Div, a, b); }
inline ExprRef operator-(ExprRef a) { return unary(UnaryOp::Neg, a); }

bool containsReduce(const ExprRef &e);

// Index-set splitting of a row's innermost loop. Where an index wraps
// around it (RotateHalf reads x[(j + d/2) mod d], a gather as it stands)
// or a body compares it with constants (Concat along the last axis:
// select(j < 512, a, select(j < 1024, b, c)); Pad's j >= p && j < p + n),
// the loop runs once per range between those points, and within each range
// rangedRem and rangedPick decide the wraps and the comparisons: each range
// reads one input with an affine index (its clamps LLVM drops, knowing the
// loop's bounds), a vector load.
struct AxisBody {
  ExprRef body;
  int axis = 0;
  int64_t extent = 0;
};
struct AxisRange {
  int64_t begin = 0, end = 0;
};
// The points in (0, extent), sorted, at which some body of `bodies` (each
// with its innermost axis, and only where that axis has `extent` elements)
// wraps Var + c mod extent or compares Var + c with a constant (<, >=).
// Empty when none does.
std::vector<int64_t> rangeSplits(const std::vector<AxisBody> &bodies, int64_t extent);
// Rem(Var(axis) + c, m) where Var(axis) runs over [lo, hi): the offset k m to
// subtract when one multiple k covers the range; nullopt otherwise (or for
// another expression).
std::optional<int64_t> rangedRem(const Expr &e, int axis, int64_t lo, int64_t hi);
// Var(axis) + c < k or >= k as a constant where Var(axis) runs over [lo,
// hi) on one side of the bound; nullopt otherwise.
std::optional<bool> rangedPick(const Expr &cond, int axis, int64_t lo, int64_t hi);

// Deterministic text of an expression (stage bodies in dumps and tests).
std::string exprToString(const ExprRef &e);

} // namespace kiln::codegen
