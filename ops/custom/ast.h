// The resolved form of a custom op's compute (docs/custom-ops.md): one
// statement per output, `out[i, j] = expr`, whose names are resolved to the
// op's inputs, attributes and index variables.
//
// An index variable is an output index (bound by the output's index list) or
// a reduction variable (bound by sum/max/min). Its extent is not written: it
// is the extent of the input axes it indexes (`uses`), which must agree when
// shapes are known. Values are f32 (the reference kernels compute in double);
// comparisons are booleans that only select() takes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ops/custom/source_text.h"

namespace kiln::ops::custom {

enum class BinOp { Add, Sub, Mul, Div, Lt, Le, Gt, Ge, Eq, Ne };
enum class Fn { Exp, Log, Sqrt, Rsqrt, Sigmoid, Tanh, Abs, Pow, Max, Min };
enum class ReduceOp { Sum, Max, Min };

bool isComparison(BinOp op);
std::string_view binOpText(BinOp op); // "+", "<=", ...
std::string_view fnName(Fn fn);
std::optional<Fn> parseFn(std::string_view name);
size_t fnArity(Fn fn);
std::string_view reduceName(ReduceOp op);
// The functions in the order docs and errors list them.
std::string functionList();

enum class ExprKind {
  Number, // `number`
  Attr,   // attribute `id` of the program, read as a scalar
  Index,  // index variable `id` read as a value
  Input,  // input `id` at `indices` (variables, one per axis)
  Neg,    // -args[0]
  Binary, // args[0] op args[1]
  Call,   // fn(args...)
  Select, // args[0] ? args[1] : args[2]
  Reduce, // reduce over variable `id` of args[0]
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind = ExprKind::Number;
  SourceLoc loc;
  double number = 0;
  int id = -1;
  std::vector<int> indices;
  BinOp op = BinOp::Add;
  Fn fn = Fn::Exp;
  ReduceOp reduce = ReduceOp::Sum;
  std::vector<ExprPtr> args;

  bool isBool() const { return kind == ExprKind::Binary && isComparison(op); }
};

// Where an index variable indexes an input: `input`'s axis `axis`.
struct AxisUse {
  int input = 0;
  int axis = 0;
  SourceLoc loc;
};

struct IndexVar {
  std::string name;
  bool reduction = false;
  SourceLoc loc; // where it is bound
  std::vector<AxisUse> uses;
};

struct Statement {
  int output = 0;
  std::vector<int> out_vars; // the output's index list
  std::vector<IndexVar> vars;
  ExprPtr body;
  // Gradient statements: the output has this input's shape and dtype, and
  // its indices take that input's axes.
  int like_input = -1;
  SourceLoc loc;
};

struct AttrRef {
  std::string name;
  AttrKind kind = AttrKind::Float;
};

struct Program {
  std::string op;
  std::string file;
  std::vector<std::string> inputs;
  std::vector<int> input_ranks;      // fixed by the uses
  std::vector<SourceLoc> input_locs; // the first use of each input
  std::vector<std::string> outputs;
  std::vector<AttrRef> attrs;        // the op's attributes the compute may read
  std::vector<Statement> statements; // one per output, in output order

  Where where() const { return Where{file, op}; }
};

// Text in the language's own syntax (derived gradients, cache keys, docs).
std::string exprText(const Program &program, const Statement &stmt, const ExprPtr &e);
std::string statementText(const Program &program, const Statement &stmt);
// Statements joined by "; ".
std::string programText(const Program &program);

bool containsReduce(const ExprPtr &e);
// The first reduction in `e` (pre-order), or null.
const Expr *firstReduce(const ExprPtr &e);
// Every input read in `e`, in pre-order.
std::vector<const Expr *> inputReads(const ExprPtr &e);
// Whether `sub` is `of` with some elements left out, in order.
bool isSubsequence(const std::vector<int> &sub, const std::vector<int> &of);
// The variables `e` reads but does not bind itself, ascending.
std::vector<int> freeVariables(const ExprPtr &e);

// Builders that fold the trivial cases (x * 1, x + 0, --x, ...), used where
// expressions are derived rather than parsed.
ExprPtr makeNumber(double v);
ExprPtr makeNeg(ExprPtr a);
ExprPtr makeBinary(BinOp op, ExprPtr a, ExprPtr b);
ExprPtr makeCall(Fn fn, std::vector<ExprPtr> args);
ExprPtr makeSelect(ExprPtr c, ExprPtr a, ExprPtr b);
ExprPtr makeReduce(ReduceOp op, int var, ExprPtr body);
ExprPtr makeInput(int input, std::vector<int> indices);
bool isNumber(const ExprPtr &e, double v);

} // namespace kiln::ops::custom
