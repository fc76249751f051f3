#include "compiler/codegen/lowering/custom_ops.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "compiler/codegen/lowering/math_exprs.h"
#include "ops/custom/shape.h"
#include "ops/op_registry.h"

namespace kiln::codegen {
namespace {

namespace custom = ops::custom;

ExprRef sigmoid(ExprRef x) { return sigmoidOf(x); }

BinaryOp binaryOf(custom::BinOp op) {
  switch (op) {
  case custom::BinOp::Add:
    return BinaryOp::Add;
  case custom::BinOp::Sub:
    return BinaryOp::Sub;
  case custom::BinOp::Mul:
    return BinaryOp::Mul;
  case custom::BinOp::Div:
    return BinaryOp::Div;
  case custom::BinOp::Lt:
    return BinaryOp::Lt;
  case custom::BinOp::Le:
    return BinaryOp::Le;
  case custom::BinOp::Gt:
    return BinaryOp::Gt;
  case custom::BinOp::Ge:
    return BinaryOp::Ge;
  case custom::BinOp::Eq:
    return BinaryOp::Eq;
  case custom::BinOp::Ne:
    return BinaryOp::Ne;
  }
  return BinaryOp::Add;
}

ReduceOp reduceOf(custom::ReduceOp op) {
  switch (op) {
  case custom::ReduceOp::Sum:
    return ReduceOp::Sum;
  case custom::ReduceOp::Max:
    return ReduceOp::Max;
  case custom::ReduceOp::Min:
    return ReduceOp::Min;
  }
  return ReduceOp::Sum;
}

// Lowers one statement, the output's indices being var(0..rank-1).
class StatementLowering {
public:
  StatementLowering(LowerContext &ctx, const custom::Statement &stmt, std::vector<int64_t> extents,
                    std::vector<double> attrs)
      : ctx_(ctx), stmt_(stmt), extents_(std::move(extents)), attrs_(std::move(attrs)) {
    for (size_t d = 0; d < stmt.out_vars.size(); ++d) {
      env_[stmt.out_vars[d]] = var(static_cast<int>(d));
      axis_[stmt.out_vars[d]] = static_cast<int>(d);
    }
  }

  ExprRef lower(const custom::ExprPtr &e, bool in_reduce) {
    const auto &a = e->args;
    switch (e->kind) {
    case custom::ExprKind::Number:
      return fconst(e->number);
    case custom::ExprKind::Attr:
      return fconst(static_cast<float>(attrs_[e->id]));
    case custom::ExprKind::Index:
      return convert(env_.at(e->id), ScalarType::F32);
    case custom::ExprKind::Input: {
      std::vector<ExprRef> indices;
      for (int v : e->indices)
        indices.push_back(env_.at(v));
      return ctx_.input(static_cast<size_t>(e->id), std::move(indices));
    }
    case custom::ExprKind::Neg:
      return -lower(a[0], in_reduce);
    case custom::ExprKind::Binary:
      return binary(binaryOf(e->op), lower(a[0], in_reduce), lower(a[1], in_reduce));
    case custom::ExprKind::Select:
      return select(lower(a[0], in_reduce), lower(a[1], in_reduce), lower(a[2], in_reduce));
    case custom::ExprKind::Call:
      return call(*e, in_reduce);
    case custom::ExprKind::Reduce:
      return reduction(e, in_reduce);
    }
    return fconst(0);
  }

private:
  ExprRef call(const custom::Expr &e, bool in_reduce) {
    ExprRef x = lower(e.args[0], in_reduce);
    switch (e.fn) {
    case custom::Fn::Exp:
      return unary(UnaryOp::Exp, x);
    case custom::Fn::Log:
      return unary(UnaryOp::Log, x);
    case custom::Fn::Sqrt:
      return unary(UnaryOp::Sqrt, x);
    case custom::Fn::Rsqrt:
      return fconst(1) / unary(UnaryOp::Sqrt, x);
    case custom::Fn::Sigmoid:
      return sigmoid(x);
    case custom::Fn::Tanh:
      return tanhOf(x);
    case custom::Fn::Abs:
      return unary(UnaryOp::Abs, x);
    case custom::Fn::Pow:
      return binary(BinaryOp::Pow, x, lower(e.args[1], in_reduce));
    case custom::Fn::Max:
      return binary(BinaryOp::Max, x, lower(e.args[1], in_reduce));
    case custom::Fn::Min:
      return binary(BinaryOp::Min, x, lower(e.args[1], in_reduce));
    }
    return x;
  }

  ExprRef inlineReduce(const custom::ExprPtr &e) {
    const int r = ctx_.newReduceVar();
    env_[e->id] = rvar(r);
    ExprRef body = lower(e->args[0], true);
    env_.erase(e->id);
    return reduce(reduceOf(e->reduce), r, extents_[e->id], body);
  }

  // A reduction over only some of the output's indices, or inside another
  // reduction, is computed once per row into a stage of the output's rank
  // (extent 1 on the axes it does not depend on) and read back.
  ExprRef reduction(const custom::ExprPtr &e, bool in_reduce) {
    const std::vector<int> free = custom::freeVariables(e);
    const bool on_outputs =
        std::all_of(free.begin(), free.end(), [&](int v) { return axis_.count(v) != 0; });
    if (!on_outputs || (!in_reduce && free.size() == stmt_.out_vars.size()))
      return inlineReduce(e);
    auto it = stages_.find(e.get());
    if (it == stages_.end()) {
      Shape shape = ctx_.outputType(stmt_.output).shape;
      for (size_t d = 0; d < shape.size(); ++d)
        if (std::find(free.begin(), free.end(), stmt_.out_vars[d]) == free.end())
          shape[d] = 1;
      ExprRef body = inlineReduce(e);
      const std::string label =
          std::string(custom::reduceName(e->reduce)) + std::to_string(stages_.size());
      it = stages_.emplace(e.get(), ctx_.addStage(label, shape, ScalarType::F32, body)).first;
    }
    std::vector<ExprRef> indices;
    for (size_t d = 0; d < stmt_.out_vars.size(); ++d)
      indices.push_back(std::find(free.begin(), free.end(), stmt_.out_vars[d]) != free.end()
                            ? var(static_cast<int>(d))
                            : iconst(0));
    return ctx_.read(it->second, std::move(indices));
  }

  LowerContext &ctx_;
  const custom::Statement &stmt_;
  std::vector<int64_t> extents_;
  std::vector<double> attrs_;
  std::map<int, ExprRef> env_; // variable -> var(d) or rvar(r)
  std::map<int, int> axis_;    // output variable -> its axis
  std::unordered_map<const custom::Expr *, int> stages_;
};

} // namespace

Expected<std::vector<ExprRef>> lowerCustomOp(LowerContext &ctx,
                                             const ops::custom::Program &program) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    shapes.push_back(ctx.inputType(i).shape);
  auto ranks = custom::checkInputRanks(program, shapes);
  if (!ranks)
    return ctx.error(ranks.message());
  std::vector<double> attrs;
  for (const custom::AttrRef &a : program.attrs) {
    const AttrValue *v = ctx.attrs().find(a.name);
    if (!v)
      return ctx.error("attribute '" + a.name + "' is missing");
    if (const double *f = std::get_if<double>(v))
      attrs.push_back(*f);
    else if (const int64_t *i = std::get_if<int64_t>(v))
      attrs.push_back(static_cast<double>(*i));
    else if (const bool *b = std::get_if<bool>(v))
      attrs.push_back(*b ? 1.0 : 0.0);
    else
      return ctx.error("attribute '" + a.name + "' is not a scalar");
  }
  std::vector<ExprRef> bodies(program.statements.size());
  for (const custom::Statement &stmt : program.statements) {
    auto extents = custom::variableExtents(program, stmt, shapes);
    if (!extents)
      return ctx.error(extents.message());
    StatementLowering lowering(ctx, stmt, std::move(*extents), attrs);
    bodies[stmt.output] = lowering.lower(stmt.body, false);
  }
  return bodies;
}

bool hasLowering(std::string_view op, const ops::OpRegistry &ops) {
  if (findLowering(op))
    return true;
  const ops::RegisteredOp *reg = ops.find(op);
  return reg && reg->impl.compute;
}

} // namespace kiln::codegen
