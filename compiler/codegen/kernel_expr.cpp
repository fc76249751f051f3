#include "compiler/codegen/kernel_expr.h"

#include <algorithm>
#include <cassert>
#include <sstream>

namespace kiln::codegen {
namespace {

ExprRef make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

bool isComparison(BinaryOp op) { return op >= BinaryOp::Lt; }

std::string_view unaryName(UnaryOp op) {
  static constexpr std::string_view names[] = {"neg", "exp", "log", "sqrt",
                                               "cos", "sin", "abs", "not"};
  return names[static_cast<int>(op)];
}

std::string_view binaryName(BinaryOp op) {
  static constexpr std::string_view names[] = {"add", "sub", "mul", "div", "max", "min",
                                               "pow", "rem", "and", "or",  "lt",  "le",
                                               "eq",  "ne",  "gt",  "ge"};
  return names[static_cast<int>(op)];
}

std::string_view reduceName(ReduceOp op) {
  static constexpr std::string_view names[] = {"sum", "max", "min"};
  return names[static_cast<int>(op)];
}

void print(std::ostringstream &os, const Expr &e) {
  auto operands = [&](size_t from = 0) {
    for (size_t i = from; i < e.operands.size(); ++i) {
      if (i > from)
        os << ", ";
      print(os, *e.operands[i]);
    }
  };
  switch (e.kind) {
  case ExprKind::FConst: {
    std::ostringstream v;
    v.precision(9);
    v << e.fvalue;
    os << v.str() << "f";
    return;
  }
  case ExprKind::IConst:
    os << (e.type == ScalarType::Bool ? (e.ivalue ? "true" : "false") : std::to_string(e.ivalue));
    return;
  case ExprKind::Var:
    os << "i" << e.var;
    return;
  case ExprKind::RVar:
    os << "r" << e.var;
    return;
  case ExprKind::Load:
    os << "b" << e.buffer << "[";
    operands();
    os << "]";
    return;
  case ExprKind::Unary:
    os << unaryName(e.unary) << "(";
    operands();
    os << ")";
    return;
  case ExprKind::Binary:
    os << binaryName(e.binary) << "(";
    operands();
    os << ")";
    return;
  case ExprKind::Select:
    os << "select(";
    operands();
    os << ")";
    return;
  case ExprKind::Convert:
    os << "convert<" << scalarTypeName(e.type) << ">(";
    operands();
    os << ")";
    return;
  case ExprKind::Round:
    os << "round<" << dtypeName(e.dtype) << ">(";
    operands();
    os << ")";
    return;
  case ExprKind::Reduce:
    os << reduceName(e.reduce) << "(r" << e.var << " < " << e.extent << ", ";
    operands();
    os << ")";
    return;
  }
}

} // namespace

ScalarType scalarTypeOf(DType dtype) {
  if (isFloat(dtype))
    return ScalarType::F32;
  return dtype == DType::Bool ? ScalarType::Bool : ScalarType::I64;
}

std::string_view scalarTypeName(ScalarType type) {
  switch (type) {
  case ScalarType::F32:
    return "f32";
  case ScalarType::I64:
    return "i64";
  case ScalarType::Bool:
    return "i1";
  }
  return "?";
}

ExprRef fconst(double value) {
  return make(Expr{.kind = ExprKind::FConst, .type = ScalarType::F32, .fvalue = value});
}

ExprRef iconst(int64_t value) {
  return make(Expr{.kind = ExprKind::IConst, .type = ScalarType::I64, .ivalue = value});
}

ExprRef bconst(bool value) {
  return make(Expr{.kind = ExprKind::IConst, .type = ScalarType::Bool, .ivalue = value ? 1 : 0});
}

ExprRef var(int axis) {
  return make(Expr{.kind = ExprKind::Var, .type = ScalarType::I64, .var = axis});
}

ExprRef rvar(int id) {
  return make(Expr{.kind = ExprKind::RVar, .type = ScalarType::I64, .var = id});
}

ExprRef load(int buffer, ScalarType type, std::vector<ExprRef> indices) {
  for ([[maybe_unused]] const ExprRef &i : indices)
    assert(i->type == ScalarType::I64);
  return make(
      Expr{.kind = ExprKind::Load, .type = type, .buffer = buffer, .operands = std::move(indices)});
}

ExprRef unary(UnaryOp op, ExprRef x) {
  assert(op == UnaryOp::Not
             ? x->type == ScalarType::Bool
             : (x->type == ScalarType::F32 ||
                (x->type == ScalarType::I64 && (op == UnaryOp::Neg || op == UnaryOp::Abs))));
  ScalarType type = x->type;
  return make(Expr{.kind = ExprKind::Unary, .type = type, .unary = op, .operands = {std::move(x)}});
}

ExprRef binary(BinaryOp op, ExprRef a, ExprRef b) {
  assert(a->type == b->type);
  assert(op != BinaryOp::Rem || a->type == ScalarType::I64);
  assert((op != BinaryOp::And && op != BinaryOp::Or) || a->type == ScalarType::Bool);
  ScalarType type = isComparison(op) ? ScalarType::Bool : a->type;
  return make(Expr{.kind = ExprKind::Binary,
                   .type = type,
                   .binary = op,
                   .operands = {std::move(a), std::move(b)}});
}

ExprRef select(ExprRef cond, ExprRef a, ExprRef b) {
  assert(cond->type == ScalarType::Bool && a->type == b->type);
  ScalarType type = a->type;
  return make(Expr{.kind = ExprKind::Select,
                   .type = type,
                   .operands = {std::move(cond), std::move(a), std::move(b)}});
}

ExprRef convert(ExprRef x, ScalarType to) {
  if (x->type == to)
    return x;
  return make(Expr{.kind = ExprKind::Convert, .type = to, .operands = {std::move(x)}});
}

ExprRef round(ExprRef x, DType dtype) {
  assert(x->type == ScalarType::F32 && isFloat(dtype));
  return make(Expr{.kind = ExprKind::Round,
                   .type = ScalarType::F32,
                   .dtype = dtype,
                   .operands = {std::move(x)}});
}

ExprRef reduce(ReduceOp op, int rvar_id, int64_t extent, ExprRef body) {
  assert(body->type != ScalarType::Bool);
  ScalarType type = body->type;
  return make(Expr{.kind = ExprKind::Reduce,
                   .type = type,
                   .var = rvar_id,
                   .reduce = op,
                   .extent = extent,
                   .operands = {std::move(body)}});
}

namespace {

bool isComparisonWithConstant(const Expr &e) {
  return e.kind == ExprKind::Binary && (e.binary == BinaryOp::Lt || e.binary == BinaryOp::Ge) &&
         e.operands[1]->kind == ExprKind::IConst;
}

// Var(axis) + c as c; nullopt for any other expression.
std::optional<int64_t> offsetOfAxis(const Expr &e, int axis) {
  if (e.kind == ExprKind::Var && e.var == axis)
    return 0;
  if (e.kind == ExprKind::Binary && e.binary == BinaryOp::Add &&
      e.operands[0]->kind == ExprKind::Var && e.operands[0]->var == axis &&
      e.operands[1]->kind == ExprKind::IConst)
    return e.operands[1]->ivalue;
  return std::nullopt;
}

void collectSplits(const Expr &e, int axis, int64_t extent, std::vector<int64_t> &splits) {
  if (e.kind == ExprKind::Binary && e.binary == BinaryOp::Rem &&
      e.operands[1]->kind == ExprKind::IConst && e.operands[1]->ivalue == extent)
    if (std::optional<int64_t> c = offsetOfAxis(*e.operands[0], axis); c && *c % extent != 0)
      splits.push_back(((extent - *c) % extent + extent) % extent);
  if (isComparisonWithConstant(e))
    if (std::optional<int64_t> c = offsetOfAxis(*e.operands[0], axis))
      splits.push_back(e.operands[1]->ivalue - *c);
  for (const ExprRef &op : e.operands)
    collectSplits(*op, axis, extent, splits);
}

} // namespace

std::vector<int64_t> rangeSplits(const std::vector<AxisBody> &bodies, int64_t extent) {
  std::vector<int64_t> found;
  for (const AxisBody &b : bodies)
    if (b.extent == extent)
      collectSplits(*b.body, b.axis, extent, found);
  std::vector<int64_t> splits;
  for (int64_t s : found)
    if (s > 0 && s < extent)
      splits.push_back(s);
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  return splits;
}

std::optional<int64_t> rangedRem(const Expr &e, int axis, int64_t lo, int64_t hi) {
  if (e.kind != ExprKind::Binary || e.binary != BinaryOp::Rem ||
      e.operands[1]->kind != ExprKind::IConst || e.operands[1]->ivalue <= 0 || hi <= lo)
    return std::nullopt;
  const std::optional<int64_t> c = offsetOfAxis(*e.operands[0], axis);
  const int64_t m = e.operands[1]->ivalue;
  if (!c || lo + *c < 0 || (lo + *c) / m != (hi - 1 + *c) / m)
    return std::nullopt;
  return (lo + *c) / m * m;
}

std::optional<bool> rangedPick(const Expr &cond, int axis, int64_t lo, int64_t hi) {
  if (!isComparisonWithConstant(cond) || hi <= lo)
    return std::nullopt;
  const std::optional<int64_t> c = offsetOfAxis(*cond.operands[0], axis);
  if (!c)
    return std::nullopt;
  const int64_t bound = cond.operands[1]->ivalue - *c; // Var < bound
  const bool less = cond.binary == BinaryOp::Lt;
  if (hi <= bound)
    return less;
  if (lo >= bound)
    return !less;
  return std::nullopt;
}

bool containsReduce(const ExprRef &e) {
  if (e->kind == ExprKind::Reduce)
    return true;
  for (const ExprRef &op : e->operands)
    if (containsReduce(op))
      return true;
  return false;
}

std::string exprToString(const ExprRef &e) {
  std::ostringstream os;
  print(os, *e);
  return os.str();
}

} // namespace kiln::codegen
