#include "ops/custom/derivative.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace kiln::ops::custom {
namespace {

ExprPtr mul(ExprPtr a, ExprPtr b) { return makeBinary(BinOp::Mul, std::move(a), std::move(b)); }
ExprPtr div(ExprPtr a, ExprPtr b) { return makeBinary(BinOp::Div, std::move(a), std::move(b)); }
ExprPtr sub(ExprPtr a, ExprPtr b) { return makeBinary(BinOp::Sub, std::move(a), std::move(b)); }
ExprPtr num(double v) { return makeNumber(v); }
ExprPtr cmp(BinOp op, ExprPtr a, ExprPtr b) { return makeBinary(op, std::move(a), std::move(b)); }

bool readsInput(const ExprPtr &e, int input) {
  if (e->kind == ExprKind::Input && e->id == input)
    return true;
  return std::any_of(e->args.begin(), e->args.end(),
                     [&](const ExprPtr &a) { return readsInput(a, input); });
}

// Whether `e` depends on index variable `v`: reads it, or an input at it.
bool readsVar(const Expr &e, int v) {
  if ((e.kind == ExprKind::Index && e.id == v) ||
      (e.kind == ExprKind::Input &&
       std::find(e.indices.begin(), e.indices.end(), v) != e.indices.end()))
    return true;
  return std::any_of(e.args.begin(), e.args.end(),
                     [&](const ExprPtr &a) { return readsVar(*a, v); });
}

void collectFactors(const ExprPtr &e, std::vector<ExprPtr> &out) {
  if (e->kind == ExprKind::Binary && e->op == BinOp::Mul) {
    collectFactors(e->args[0], out);
    collectFactors(e->args[1], out);
  } else {
    out.push_back(e);
  }
}

// sum(v, body) with the factors of `body` that do not depend on `v` moved
// out: sum(v, a(v) * b) = b * sum(v, a(v)). A gradient through a
// normalisation (y = x * rsqrt(sum(k, x^2))) would otherwise evaluate the
// inner sum once per step of the outer one, quadratic per row; outside, it
// is computed once.
ExprPtr sumOver(int v, const ExprPtr &body) {
  std::vector<ExprPtr> factors, inside, outside;
  collectFactors(body, factors);
  for (const ExprPtr &f : factors)
    (readsVar(*f, v) ? inside : outside).push_back(f);
  auto product = [](const std::vector<ExprPtr> &fs) {
    ExprPtr p = fs.front();
    for (size_t i = 1; i < fs.size(); ++i)
      p = mul(p, fs[i]);
    return p;
  };
  if (inside.empty())
    inside.push_back(num(1));
  ExprPtr summed = makeReduce(ReduceOp::Sum, v, product(inside));
  return outside.empty() ? summed : mul(product(outside), summed);
}

// One place the input is read, with the gradient flowing into it (without
// dy) and the sums around it.
struct Read {
  const Expr *ref;
  ExprPtr adjoint;
  std::vector<int> sums;
};

class Differentiator {
public:
  Differentiator(const Program &program, const Statement &stmt, int input)
      : program_(program), stmt_(stmt), input_(input) {}

  Status visit(const ExprPtr &e, const ExprPtr &adj) {
    if (!readsInput(e, input_) || isNumber(adj, 0))
      return Status::ok();
    const std::vector<ExprPtr> &a = e->args;
    switch (e->kind) {
    case ExprKind::Input:
      reads.push_back({e.get(), adj, sums_});
      return Status::ok();
    case ExprKind::Neg:
      return visit(a[0], makeNeg(adj));
    case ExprKind::Binary:
      switch (e->op) {
      case BinOp::Add:
        KILN_RETURN_IF_ERROR(visit(a[0], adj));
        return visit(a[1], adj);
      case BinOp::Sub:
        KILN_RETURN_IF_ERROR(visit(a[0], adj));
        return visit(a[1], makeNeg(adj));
      case BinOp::Mul:
        KILN_RETURN_IF_ERROR(visit(a[0], mul(adj, a[1])));
        return visit(a[1], mul(adj, a[0]));
      case BinOp::Div:
        KILN_RETURN_IF_ERROR(visit(a[0], div(adj, a[1])));
        return visit(a[1], makeNeg(div(mul(adj, a[0]), mul(a[1], a[1]))));
      default: // a comparison: no gradient flows through a condition
        return Status::ok();
      }
    case ExprKind::Call:
      return call(e, adj);
    case ExprKind::Select:
      KILN_RETURN_IF_ERROR(visit(a[1], makeSelect(a[0], adj, num(0))));
      return visit(a[2], makeSelect(a[0], num(0), adj));
    case ExprKind::Reduce: {
      if (e->reduce != ReduceOp::Sum)
        return program_.where().error(
            e->loc,
            "cannot derive the gradient in input '" + program_.inputs[input_] +
                "': it is read inside " + std::string(reduceName(e->reduce)) + "(" +
                stmt_.vars[e->id].name +
                ", ...), whose gradient is not derived; declare it with <gradient input=\"" +
                program_.inputs[input_] + "\">");
      sums_.push_back(e->id);
      Status s = visit(a[0], adj);
      sums_.pop_back();
      return s;
    }
    default:
      return Status::ok();
    }
  }

  std::vector<Read> reads;

private:
  Status call(const ExprPtr &e, const ExprPtr &adj) {
    const std::vector<ExprPtr> &a = e->args;
    switch (e->fn) {
    case Fn::Exp:
      return visit(a[0], mul(adj, e));
    case Fn::Log:
      return visit(a[0], div(adj, a[0]));
    case Fn::Sqrt:
      return visit(a[0], div(adj, mul(num(2), e)));
    case Fn::Rsqrt: // d/da a^-1/2 = -1/2 a^-3/2
      return visit(a[0], mul(adj, mul(num(-0.5), mul(e, mul(e, e)))));
    case Fn::Sigmoid:
      return visit(a[0], mul(adj, mul(e, sub(num(1), e))));
    case Fn::Tanh:
      return visit(a[0], mul(adj, sub(num(1), mul(e, e))));
    case Fn::Abs: // sign(a), 0 at 0 as PyTorch
      return visit(a[0],
                   makeSelect(cmp(BinOp::Gt, a[0], num(0)), adj,
                              makeSelect(cmp(BinOp::Lt, a[0], num(0)), makeNeg(adj), num(0))));
    case Fn::Pow:
      KILN_RETURN_IF_ERROR(
          visit(a[0], mul(adj, mul(a[1], makeCall(Fn::Pow, {a[0], sub(a[1], num(1))})))));
      return visit(a[1], mul(adj, mul(e, makeCall(Fn::Log, {a[0]}))));
    case Fn::Max:
    case Fn::Min: {
      // Ties send the gradient to the first operand.
      ExprPtr first = cmp(e->fn == Fn::Max ? BinOp::Ge : BinOp::Le, a[0], a[1]);
      KILN_RETURN_IF_ERROR(visit(a[0], makeSelect(first, adj, num(0))));
      return visit(a[1], makeSelect(first, num(0), adj));
    }
    }
    return Status::ok();
  }

  const Program &program_;
  const Statement &stmt_;
  const int input_;
  std::vector<int> sums_;
};

// Copies forward expressions into the gradient statement, renaming variables.
class Cloner {
public:
  Cloner(const Statement &from, Statement &to) : from_(from), to_(to) {}

  int addVar(int from_var, bool reduction) {
    IndexVar v = from_.vars[from_var];
    v.reduction = reduction;
    to_.vars.push_back(std::move(v));
    return static_cast<int>(to_.vars.size()) - 1;
  }

  // `vars` maps forward variables to gradient ones; a reduction inside gets a
  // fresh variable. Clones are shared while the mapping stays the same.
  ExprPtr clone(const ExprPtr &e, std::map<int, int> &vars,
                std::unordered_map<const Expr *, ExprPtr> &memo) {
    if (auto it = memo.find(e.get()); it != memo.end())
      return it->second;
    Expr c = *e;
    switch (e->kind) {
    case ExprKind::Index:
      c.id = vars.at(e->id);
      break;
    case ExprKind::Input:
      for (int &v : c.indices)
        v = vars.at(v);
      break;
    case ExprKind::Reduce: {
      auto saved = vars.find(e->id) == vars.end() ? -1 : vars[e->id];
      c.id = addVar(e->id, true);
      vars[e->id] = c.id;
      std::unordered_map<const Expr *, ExprPtr> inner;
      c.args = {clone(e->args[0], vars, inner)};
      if (saved < 0)
        vars.erase(e->id);
      else
        vars[e->id] = saved;
      ExprPtr out = std::make_shared<const Expr>(std::move(c));
      memo[e.get()] = out;
      return out;
    }
    default:
      break;
    }
    for (ExprPtr &a : c.args)
      a = clone(a, vars, memo);
    ExprPtr out = std::make_shared<const Expr>(std::move(c));
    memo[e.get()] = out;
    return out;
  }

private:
  const Statement &from_;
  Statement &to_;
};

const Expr *firstRead(const ExprPtr &e, int input) {
  if (e->kind == ExprKind::Input && e->id == input)
    return e.get();
  for (const ExprPtr &a : e->args)
    if (const Expr *r = firstRead(a, input))
      return r;
  return nullptr;
}

// Distinct variable names that clash with no input or attribute.
void uniquifyNames(const Program &program, Statement &stmt) {
  std::set<std::string> taken(program.inputs.begin(), program.inputs.end());
  for (const AttrRef &a : program.attrs)
    taken.insert(a.name);
  for (IndexVar &v : stmt.vars) {
    std::string name = v.name;
    for (int n = 2; taken.count(name); ++n)
      name = v.name + std::to_string(n);
    v.name = name;
    taken.insert(name);
  }
}

} // namespace

std::string gradientOpName(const std::string &op, int input) {
  return op + "Grad" + std::to_string(input);
}

std::string outputGradientName(const Program &forward, int output) {
  return "d" + forward.outputs[output];
}

Expected<Program> gradientProgram(const Program &forward, int input) {
  Program g;
  g.op = gradientOpName(forward.op, input);
  g.file = forward.file;
  g.inputs = forward.inputs;
  g.input_ranks = forward.input_ranks;
  g.input_locs = forward.input_locs;
  for (size_t k = 0; k < forward.outputs.size(); ++k) {
    const std::string name = outputGradientName(forward, static_cast<int>(k));
    if (std::find(forward.inputs.begin(), forward.inputs.end(), name) != forward.inputs.end())
      return forward.where().error("input '" + name +
                                   "' has the name the gradient op gives the "
                                   "gradient of output '" +
                                   forward.outputs[k] + "': rename one of them");
    g.inputs.push_back(name);
    g.input_ranks.push_back(static_cast<int>(forward.statements[k].out_vars.size()));
    g.input_locs.push_back(SourceLoc{});
  }
  g.outputs = {"d" + forward.inputs[input]};
  g.attrs = forward.attrs;
  return g;
}

Expected<Statement> deriveGradient(const Program &forward, int input) {
  KILN_ASSIGN_OR_RETURN(Program grad, gradientProgram(forward, input));
  Statement g;
  g.output = 0;
  g.like_input = input;
  const int rank = forward.input_ranks[input];
  // The output's variables take the names of the first read's indices.
  std::vector<std::string> names;
  for (const Statement &st : forward.statements)
    if (const Expr *r = names.empty() ? firstRead(st.body, input) : nullptr)
      for (int v : r->indices)
        names.push_back(st.vars[v].name);
  for (int d = 0; d < rank; ++d) {
    IndexVar v;
    v.name = d < static_cast<int>(names.size()) ? names[d] : "i" + std::to_string(d);
    v.uses.push_back({input, d, {}});
    g.vars.push_back(std::move(v));
    g.out_vars.push_back(d);
  }
  ExprPtr total = makeNumber(0);
  const int num_inputs = static_cast<int>(forward.inputs.size());
  for (const Statement &st : forward.statements) {
    if (!g.loc.line)
      g.loc = st.loc;
    Differentiator diff(forward, st, input);
    KILN_RETURN_IF_ERROR(diff.visit(st.body, makeNumber(1)));
    Cloner cloner(st, g);
    for (const Read &read : diff.reads) {
      const std::vector<int> &J = read.ref->indices;
      std::map<int, int> vars;
      for (int d = 0; d < rank; ++d) {
        if (vars.count(J[d]))
          return forward.where().error(
              read.ref->loc, "cannot derive the gradient in input '" + forward.inputs[input] +
                                 "': it is read with the index '" + st.vars[J[d]].name +
                                 "' twice; declare it with <gradient input=\"" +
                                 forward.inputs[input] + "\">");
        vars[J[d]] = d;
      }
      // Every other variable free at the read is summed over.
      std::vector<int> summed;
      std::vector<int> free = st.out_vars;
      free.insert(free.end(), read.sums.begin(), read.sums.end());
      for (int v : free) {
        if (vars.count(v))
          continue;
        const int id = cloner.addVar(v, true);
        auto pos = std::find(st.out_vars.begin(), st.out_vars.end(), v);
        if (pos != st.out_vars.end()) // dy has the output's shape
          g.vars[id].uses.push_back(
              {num_inputs + st.output, static_cast<int>(pos - st.out_vars.begin()), {}});
        vars[v] = id;
        summed.push_back(id);
      }
      std::vector<int> dy_indices;
      for (int v : st.out_vars)
        dy_indices.push_back(vars.at(v));
      std::unordered_map<const Expr *, ExprPtr> memo;
      ExprPtr term = makeBinary(BinOp::Mul, makeInput(num_inputs + st.output, dy_indices),
                                cloner.clone(read.adjoint, vars, memo));
      for (size_t k = summed.size(); k-- > 0;)
        term = sumOver(summed[k], term);
      total = makeBinary(BinOp::Add, total, term);
    }
  }
  g.body = total;
  uniquifyNames(grad, g);
  return g;
}

std::string_view statementKind(const Statement &stmt) {
  if (containsReduce(stmt.body))
    return "reduce";
  bool elementwise = true, broadcast = true;
  for (const Expr *r : inputReads(stmt.body)) {
    elementwise = elementwise && r->indices == stmt.out_vars;
    broadcast = broadcast && isSubsequence(r->indices, stmt.out_vars);
  }
  return elementwise ? "elementwise" : broadcast ? "broadcast" : "injective";
}

} // namespace kiln::ops::custom
