#include "ops/custom/ast.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace kiln::ops::custom {
namespace {

struct FnInfo {
  Fn fn;
  std::string_view name;
  size_t arity;
};

constexpr FnInfo kFunctions[] = {
    {Fn::Exp, "exp", 1},     {Fn::Log, "log", 1},         {Fn::Sqrt, "sqrt", 1},
    {Fn::Rsqrt, "rsqrt", 1}, {Fn::Sigmoid, "sigmoid", 1}, {Fn::Tanh, "tanh", 1},
    {Fn::Abs, "abs", 1},     {Fn::Pow, "pow", 2},         {Fn::Max, "max", 2},
    {Fn::Min, "min", 2},
};

std::string numberText(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// Binding strength: comparisons 1, + - 2, * / 3, unary minus 4, the rest 5.
int precedence(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Binary:
    if (isComparison(e.op))
      return 1;
    return e.op == BinOp::Add || e.op == BinOp::Sub ? 2 : 3;
  case ExprKind::Neg:
    return 4;
  case ExprKind::Number:
    return e.number < 0 || (e.number == 0 && std::signbit(e.number)) ? 4 : 5;
  default:
    return 5;
  }
}

class Printer {
public:
  Printer(const Program &p, const Statement &s) : program_(p), stmt_(s) {}

  std::string print(const ExprPtr &e, int min_prec = 0) const {
    std::string text = printBare(*e);
    return precedence(*e) < min_prec ? "(" + text + ")" : text;
  }

private:
  std::string var(int id) const { return stmt_.vars[id].name; }

  std::string printBare(const Expr &e) const {
    switch (e.kind) {
    case ExprKind::Number:
      return numberText(e.number);
    case ExprKind::Attr:
      return program_.attrs[e.id].name;
    case ExprKind::Index:
      return var(e.id);
    case ExprKind::Input: {
      std::string s = program_.inputs[e.id];
      if (e.indices.empty())
        return s;
      s += "[";
      for (size_t d = 0; d < e.indices.size(); ++d)
        s += (d ? ", " : "") + var(e.indices[d]);
      return s + "]";
    }
    case ExprKind::Neg:
      return "-" + print(e.args[0], 4);
    case ExprKind::Binary: {
      const int p = precedence(e);
      const bool cmp = isComparison(e.op);
      return print(e.args[0], cmp ? p + 1 : p) + " " + std::string(binOpText(e.op)) + " " +
             print(e.args[1], p + 1);
    }
    case ExprKind::Call: {
      std::string s = std::string(fnName(e.fn)) + "(";
      for (size_t i = 0; i < e.args.size(); ++i)
        s += (i ? ", " : "") + print(e.args[i]);
      return s + ")";
    }
    case ExprKind::Select:
      return "select(" + print(e.args[0]) + ", " + print(e.args[1]) + ", " + print(e.args[2]) + ")";
    case ExprKind::Reduce:
      return std::string(reduceName(e.reduce)) + "(" + var(e.id) + ", " + print(e.args[0]) + ")";
    }
    return "?";
  }

  const Program &program_;
  const Statement &stmt_;
};

void collectFree(const ExprPtr &e, std::set<int> &bound, std::set<int> &out) {
  switch (e->kind) {
  case ExprKind::Index:
    if (!bound.count(e->id))
      out.insert(e->id);
    return;
  case ExprKind::Input:
    for (int v : e->indices)
      if (!bound.count(v))
        out.insert(v);
    return;
  case ExprKind::Reduce: {
    const bool fresh = bound.insert(e->id).second;
    collectFree(e->args[0], bound, out);
    if (fresh)
      bound.erase(e->id);
    return;
  }
  default:
    for (const ExprPtr &a : e->args)
      collectFree(a, bound, out);
  }
}

ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

} // namespace

bool isComparison(BinOp op) { return op >= BinOp::Lt; }

std::string_view binOpText(BinOp op) {
  switch (op) {
  case BinOp::Add:
    return "+";
  case BinOp::Sub:
    return "-";
  case BinOp::Mul:
    return "*";
  case BinOp::Div:
    return "/";
  case BinOp::Lt:
    return "<";
  case BinOp::Le:
    return "<=";
  case BinOp::Gt:
    return ">";
  case BinOp::Ge:
    return ">=";
  case BinOp::Eq:
    return "==";
  case BinOp::Ne:
    return "!=";
  }
  return "?";
}

std::string_view fnName(Fn fn) {
  for (const FnInfo &f : kFunctions)
    if (f.fn == fn)
      return f.name;
  return "?";
}

std::optional<Fn> parseFn(std::string_view name) {
  for (const FnInfo &f : kFunctions)
    if (f.name == name)
      return f.fn;
  return std::nullopt;
}

size_t fnArity(Fn fn) {
  for (const FnInfo &f : kFunctions)
    if (f.fn == fn)
      return f.arity;
  return 1;
}

std::string_view reduceName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  }
  return "?";
}

std::string functionList() {
  std::string s;
  for (const FnInfo &f : kFunctions)
    s += std::string(f.name) + ", ";
  return s + "select, sum";
}

std::string exprText(const Program &program, const Statement &stmt, const ExprPtr &e) {
  return Printer(program, stmt).print(e);
}

std::string statementText(const Program &program, const Statement &stmt) {
  std::string s = program.outputs[stmt.output];
  if (!stmt.out_vars.empty()) {
    s += "[";
    for (size_t d = 0; d < stmt.out_vars.size(); ++d)
      s += (d ? ", " : "") + stmt.vars[stmt.out_vars[d]].name;
    s += "]";
  }
  return s + " = " + exprText(program, stmt, stmt.body);
}

std::string programText(const Program &program) {
  std::string s;
  for (const Statement &stmt : program.statements)
    s += (s.empty() ? "" : "; ") + statementText(program, stmt);
  return s;
}

bool containsReduce(const ExprPtr &e) {
  if (e->kind == ExprKind::Reduce)
    return true;
  return std::any_of(e->args.begin(), e->args.end(), containsReduce);
}

const Expr *firstReduce(const ExprPtr &e) {
  if (e->kind == ExprKind::Reduce)
    return e.get();
  for (const ExprPtr &a : e->args)
    if (const Expr *r = firstReduce(a))
      return r;
  return nullptr;
}

static void collectReads(const ExprPtr &e, std::vector<const Expr *> &out) {
  if (e->kind == ExprKind::Input)
    out.push_back(e.get());
  for (const ExprPtr &a : e->args)
    collectReads(a, out);
}

std::vector<const Expr *> inputReads(const ExprPtr &e) {
  std::vector<const Expr *> out;
  collectReads(e, out);
  return out;
}

bool isSubsequence(const std::vector<int> &sub, const std::vector<int> &of) {
  size_t k = 0;
  for (int v : of)
    if (k < sub.size() && sub[k] == v)
      ++k;
  return k == sub.size();
}

std::vector<int> freeVariables(const ExprPtr &e) {
  std::set<int> bound, out;
  collectFree(e, bound, out);
  return std::vector<int>(out.begin(), out.end());
}

bool isNumber(const ExprPtr &e, double v) { return e->kind == ExprKind::Number && e->number == v; }

ExprPtr makeNumber(double v) {
  Expr e;
  e.kind = ExprKind::Number;
  e.number = v;
  return make(std::move(e));
}

ExprPtr makeNeg(ExprPtr a) {
  if (a->kind == ExprKind::Number)
    return makeNumber(-a->number);
  if (a->kind == ExprKind::Neg)
    return a->args[0];
  Expr e;
  e.kind = ExprKind::Neg;
  e.args = {std::move(a)};
  return make(std::move(e));
}

ExprPtr makeBinary(BinOp op, ExprPtr a, ExprPtr b) {
  switch (op) {
  case BinOp::Add:
    if (isNumber(a, 0))
      return b;
    if (isNumber(b, 0))
      return a;
    break;
  case BinOp::Sub:
    if (isNumber(b, 0))
      return a;
    if (isNumber(a, 0))
      return makeNeg(b);
    break;
  case BinOp::Mul:
    if (isNumber(a, 0) || isNumber(b, 0))
      return makeNumber(0);
    if (isNumber(a, 1))
      return b;
    if (isNumber(b, 1))
      return a;
    if (isNumber(a, -1))
      return makeNeg(b);
    if (isNumber(b, -1))
      return makeNeg(a);
    if (b->kind == ExprKind::Binary && b->op == BinOp::Div && isNumber(b->args[0], 1))
      return makeBinary(BinOp::Div, a, b->args[1]); // a * (1 / c) = a / c
    break;
  case BinOp::Div:
    if (isNumber(a, 0))
      return makeNumber(0);
    if (isNumber(b, 1))
      return a;
    break;
  default:
    break;
  }
  if (a->kind == ExprKind::Number && b->kind == ExprKind::Number && !isComparison(op)) {
    const double x = a->number, y = b->number;
    switch (op) {
    case BinOp::Add:
      return makeNumber(x + y);
    case BinOp::Sub:
      return makeNumber(x - y);
    case BinOp::Mul:
      return makeNumber(x * y);
    default:
      break;
    }
  }
  Expr e;
  e.kind = ExprKind::Binary;
  e.op = op;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprPtr makeCall(Fn fn, std::vector<ExprPtr> args) {
  Expr e;
  e.kind = ExprKind::Call;
  e.fn = fn;
  e.args = std::move(args);
  return make(std::move(e));
}

ExprPtr makeSelect(ExprPtr c, ExprPtr a, ExprPtr b) {
  if (isNumber(a, 0) && isNumber(b, 0))
    return a;
  Expr e;
  e.kind = ExprKind::Select;
  e.args = {std::move(c), std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprPtr makeReduce(ReduceOp op, int var, ExprPtr body) {
  if (op == ReduceOp::Sum && isNumber(body, 0))
    return body;
  Expr e;
  e.kind = ExprKind::Reduce;
  e.reduce = op;
  e.id = var;
  e.args = {std::move(body)};
  return make(std::move(e));
}

ExprPtr makeInput(int input, std::vector<int> indices) {
  Expr e;
  e.kind = ExprKind::Input;
  e.id = input;
  e.indices = std::move(indices);
  return make(std::move(e));
}

} // namespace kiln::ops::custom
