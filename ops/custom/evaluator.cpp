#include "ops/custom/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "ops/custom/shape.h"
#include "ops/kernel_util.h"

namespace kiln::ops::custom {
namespace {

class Evaluator {
public:
  Evaluator(const Statement &stmt, const std::vector<std::vector<double>> &in,
            const std::vector<std::vector<int64_t>> &strides, const std::vector<double> &attrs,
            const std::vector<int64_t> &extents)
      : stmt_(stmt), in_(in), strides_(strides), attrs_(attrs), extents_(extents),
        env_(stmt.vars.size(), 0) {}

  std::vector<double> run(const Shape &out_shape) {
    const int64_t n = numElements(out_shape);
    std::vector<double> values(static_cast<size_t>(n));
    std::vector<int64_t> index(out_shape.size(), 0);
    for (int64_t flat = 0; flat < n; ++flat) {
      for (size_t d = 0; d < index.size(); ++d)
        env_[stmt_.out_vars[d]] = index[d];
      element_memo_.clear();
      values[static_cast<size_t>(flat)] = eval(*stmt_.body);
      for (size_t d = index.size(); d-- > 0;) { // row-major increment
        if (++index[d] < out_shape[d])
          break;
        index[d] = 0;
      }
    }
    return values;
  }

private:
  double eval(const Expr &e) {
    switch (e.kind) {
    case ExprKind::Number:
      return e.number;
    case ExprKind::Attr:
      return attrs_[e.id];
    case ExprKind::Index:
      return static_cast<double>(env_[e.id]);
    case ExprKind::Input: {
      int64_t offset = 0;
      for (size_t d = 0; d < e.indices.size(); ++d)
        offset += env_[e.indices[d]] * strides_[e.id][d];
      return in_[e.id][static_cast<size_t>(offset)];
    }
    case ExprKind::Neg:
      return -eval(*e.args[0]);
    case ExprKind::Binary: {
      const double a = eval(*e.args[0]), b = eval(*e.args[1]);
      switch (e.op) {
      case BinOp::Add:
        return a + b;
      case BinOp::Sub:
        return a - b;
      case BinOp::Mul:
        return a * b;
      case BinOp::Div:
        return a / b;
      case BinOp::Lt:
        return a < b;
      case BinOp::Le:
        return a <= b;
      case BinOp::Gt:
        return a > b;
      case BinOp::Ge:
        return a >= b;
      case BinOp::Eq:
        return a == b;
      case BinOp::Ne:
        return a != b;
      }
      return 0;
    }
    case ExprKind::Call:
      return e.args.size() == 1 ? applyFn(e.fn, eval(*e.args[0]))
                                : applyFn(e.fn, eval(*e.args[0]), eval(*e.args[1]));
    case ExprKind::Select:
      return eval(*e.args[0]) != 0 ? eval(*e.args[1]) : eval(*e.args[2]);
    case ExprKind::Reduce: {
      // A reduction depends only on its free variables: one that does not
      // vary with the element (a row's norm inside a gradient) is computed
      // once per value of them, not once per element.
      // One that depends on every output index is kept for this element only.
      std::pair<const Expr *, std::vector<int64_t>> key{&e, {}};
      size_t out_vars = 0;
      for (int v : freeVars(e)) {
        key.second.push_back(env_[v]);
        out_vars += std::count(stmt_.out_vars.begin(), stmt_.out_vars.end(), v);
      }
      auto &memo = out_vars == stmt_.out_vars.size() ? element_memo_ : memo_;
      if (auto it = memo.find(key); it != memo.end())
        return it->second;
      double acc = e.reduce == ReduceOp::Sum   ? 0.0
                   : e.reduce == ReduceOp::Max ? -std::numeric_limits<double>::infinity()
                                               : std::numeric_limits<double>::infinity();
      const int64_t saved = env_[e.id];
      for (int64_t k = 0; k < extents_[e.id]; ++k) {
        env_[e.id] = k;
        const double v = eval(*e.args[0]);
        acc = e.reduce == ReduceOp::Sum   ? acc + v
              : e.reduce == ReduceOp::Max ? std::fmax(acc, v)
                                          : std::fmin(acc, v);
      }
      env_[e.id] = saved;
      memo.emplace(std::move(key), acc);
      return acc;
    }
    }
    return 0;
  }

  // The index variables `e` reads that no reduction inside it binds.
  const std::vector<int> &freeVars(const Expr &e) {
    auto it = free_vars_.find(&e);
    if (it != free_vars_.end())
      return it->second;
    std::set<int> vars;
    if (e.kind == ExprKind::Index)
      vars.insert(e.id);
    if (e.kind == ExprKind::Input)
      vars.insert(e.indices.begin(), e.indices.end());
    for (const ExprPtr &a : e.args) {
      const std::vector<int> &inner = freeVars(*a);
      vars.insert(inner.begin(), inner.end());
    }
    if (e.kind == ExprKind::Reduce)
      vars.erase(e.id);
    return free_vars_[&e] = std::vector<int>(vars.begin(), vars.end());
  }

  const Statement &stmt_;
  const std::vector<std::vector<double>> &in_;
  const std::vector<std::vector<int64_t>> &strides_;
  const std::vector<double> &attrs_;
  const std::vector<int64_t> &extents_;
  std::vector<int64_t> env_;
  std::unordered_map<const Expr *, std::vector<int>> free_vars_;
  std::map<std::pair<const Expr *, std::vector<int64_t>>, double> memo_, element_memo_;
};

} // namespace

double applyFn(Fn fn, double a, double b) {
  switch (fn) {
  case Fn::Exp:
    return std::exp(a);
  case Fn::Log:
    return std::log(a);
  case Fn::Sqrt:
    return std::sqrt(a);
  case Fn::Rsqrt:
    return 1.0 / std::sqrt(a);
  case Fn::Sigmoid:
    return 1.0 / (1.0 + std::exp(-a));
  case Fn::Tanh:
    return std::tanh(a);
  case Fn::Abs:
    return std::fabs(a);
  case Fn::Pow:
    return std::pow(a, b);
  case Fn::Max:
    return std::fmax(a, b);
  case Fn::Min:
    return std::fmin(a, b);
  }
  return 0;
}

Status evaluateProgram(const Program &program, const KernelContext &ctx,
                       const std::vector<const Tensor *> &inputs, std::vector<Tensor> &outputs,
                       const AttrMap &attrs) {
  std::vector<Shape> shapes;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor *t : inputs) {
    shapes.push_back(t->shape());
    strides.push_back(stridesOf(t->shape()));
    std::vector<double> v(static_cast<size_t>(t->numElements()));
    for (int64_t i = 0; i < t->numElements(); ++i)
      v[static_cast<size_t>(i)] = t->getFloat(i);
    values.push_back(std::move(v));
  }
  KILN_RETURN_IF_ERROR(checkInputRanks(program, shapes));
  std::vector<double> attr_values;
  for (const AttrRef &a : program.attrs) {
    switch (a.kind) {
    case AttrKind::Float:
      attr_values.push_back(attrs.getFloat(a.name));
      break;
    case AttrKind::Int:
      attr_values.push_back(static_cast<double>(attrs.getInt(a.name)));
      break;
    default:
      attr_values.push_back(attrs.getBool(a.name) ? 1.0 : 0.0);
    }
  }
  for (const Statement &stmt : program.statements) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> extents, variableExtents(program, stmt, shapes));
    Tensor &out = outputs[stmt.output];
    Evaluator ev(stmt, values, strides, attr_values, extents);
    storeDoubles(out, ev.run(out.shape()), ctx.overflow);
  }
  return Status::ok();
}

} // namespace kiln::ops::custom
