#include "ops/custom/checker.h"

#include <algorithm>

namespace kiln::ops::custom {
namespace {

std::string joined(const std::vector<std::string> &names) {
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

class Checker {
public:
  explicit Checker(const Signature &sig) : sig_(sig), where_{sig.file, sig.op} {
    program_.op = sig.op;
    program_.file = sig.file;
    program_.inputs = sig.inputs;
    program_.outputs = sig.outputs;
    program_.input_ranks.assign(sig.inputs.size(), -1);
    program_.input_locs.assign(sig.inputs.size(), SourceLoc{});
    for (size_t i = 0; i < sig.ranks.size() && i < sig.inputs.size(); ++i)
      if (sig.ranks[i])
        program_.input_ranks[i] = *sig.ranks[i];
    for (const auto &[name, kind] : sig.attrs)
      if (kind == AttrKind::Float || kind == AttrKind::Int || kind == AttrKind::Bool)
        program_.attrs.push_back({name, kind});
  }

  Expected<Program> run(const std::vector<SyntaxStatement> &statements) {
    std::vector<const SyntaxStatement *> by_output(sig_.outputs.size(), nullptr);
    for (const SyntaxStatement &s : statements) {
      const int k = indexOf(sig_.outputs, s.output.name);
      if (k < 0) {
        if (inputOf(s.output.name) >= 0)
          return where_.error(s.output.loc, "'" + s.output.name +
                                                "' is an input; the left-hand side must be an "
                                                "output (" +
                                                joined(sig_.outputs) + ")");
        return where_.error(s.output.loc, "unknown output '" + s.output.name +
                                              "': expected one of the op's outputs (" +
                                              joined(sig_.outputs) + ")");
      }
      if (by_output[k])
        return where_.error(s.output.loc, "output '" + s.output.name +
                                              "' is computed twice (also at " +
                                              locString(by_output[k]->output.loc) + ")");
      by_output[k] = &s;
    }
    for (size_t k = 0; k < sig_.outputs.size(); ++k) {
      if (!by_output[k])
        return where_.error(sig_.loc, "no statement computes output '" + sig_.outputs[k] +
                                          "': expected " + sig_.outputs[k] + "[...] = ...");
      KILN_ASSIGN_OR_RETURN(Statement st, statement(*by_output[k], static_cast<int>(k)));
      program_.statements.push_back(std::move(st));
    }
    for (size_t i = 0; i < sig_.inputs.size(); ++i)
      if (program_.input_ranks[i] < 0)
        return where_.error(sig_.loc, "input '" + sig_.inputs[i] +
                                          "' is never read by the compute, so its rank is "
                                          "unknown: read it or remove it");
    return std::move(program_);
  }

private:
  static int indexOf(const std::vector<std::string> &names, const std::string &name) {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  }
  int inputOf(const std::string &name) const {
    int i = indexOf(sig_.inputs, name);
    if (i < 0)
      if (auto it = sig_.input_aliases.find(name); it != sig_.input_aliases.end())
        i = it->second;
    return i;
  }
  int attrOf(const std::string &name) const {
    for (size_t a = 0; a < program_.attrs.size(); ++a)
      if (program_.attrs[a].name == name)
        return static_cast<int>(a);
    return -1;
  }
  const std::pair<std::string, AttrKind> *anyAttr(const std::string &name) const {
    for (const auto &a : sig_.attrs)
      if (a.first == name)
        return &a;
    return nullptr;
  }
  // The innermost variable of that name in scope, or -1.
  int lookup(const std::string &name) const {
    for (size_t k = scope_.size(); k-- > 0;)
      if (stmt_->vars[scope_[k]].name == name)
        return scope_[k];
    return -1;
  }
  std::string scopeNames() const {
    std::vector<std::string> names;
    for (int v : scope_)
      names.push_back(stmt_->vars[v].name);
    return joined(names);
  }

  Expected<Statement> statement(const SyntaxStatement &s, int output) {
    Statement st;
    st.output = output;
    st.loc = s.output.loc;
    stmt_ = &st;
    scope_.clear();
    const int like = sig_.like_input.empty() ? -1 : sig_.like_input[output];
    st.like_input = like;
    if (like >= 0 && program_.input_ranks[like] >= 0 &&
        program_.input_ranks[like] != static_cast<int>(s.indices.size()))
      return where_.error(s.output.loc,
                          "'" + s.output.name + "' is the gradient of input '" + sig_.inputs[like] +
                              "' of rank " + std::to_string(program_.input_ranks[like]) +
                              ": expected " + std::to_string(program_.input_ranks[like]) +
                              " indices, got " + std::to_string(s.indices.size()));
    for (size_t d = 0; d < s.indices.size(); ++d) {
      const NameAt &idx = s.indices[d];
      if (lookup(idx.name) >= 0)
        return where_.error(idx.loc, "index '" + idx.name + "' appears twice in " + s.output.name +
                                         "[...]: expected distinct names");
      KILN_RETURN_IF_ERROR(checkNewName(idx, "an index"));
      IndexVar v{idx.name, false, idx.loc, {}};
      if (like >= 0)
        v.uses.push_back({like, static_cast<int>(d), idx.loc});
      st.vars.push_back(std::move(v));
      st.out_vars.push_back(static_cast<int>(st.vars.size()) - 1);
      scope_.push_back(static_cast<int>(st.vars.size()) - 1);
    }
    if (like >= 0)
      fixRank(like, static_cast<int>(s.indices.size()), s.output.loc);
    KILN_ASSIGN_OR_RETURN(st.body, value(s.rhs));
    for (int v : st.out_vars)
      if (st.vars[v].uses.empty())
        return where_.error(st.vars[v].loc,
                            "index '" + st.vars[v].name + "' of output '" + s.output.name +
                                "' is not bound by any input: expected it to index an input on "
                                "the right-hand side, as in x[..., " +
                                st.vars[v].name + ", ...], which gives its extent");
    stmt_ = nullptr;
    return st;
  }

  // An index or reduction variable may not take the name of an input or attribute.
  Status checkNewName(const NameAt &n, const std::string &what) const {
    if (inputOf(n.name) >= 0)
      return where_.error(n.loc, what + " variable may not be called '" + n.name +
                                     "', the name of an input");
    if (anyAttr(n.name))
      return where_.error(n.loc, what + " variable may not be called '" + n.name +
                                     "', the name of an attribute");
    return Status::ok();
  }

  void fixRank(int input, int rank, SourceLoc loc) {
    if (program_.input_ranks[input] < 0)
      program_.input_ranks[input] = rank;
    if (program_.input_locs[input].line == 0)
      program_.input_locs[input] = loc;
  }

  Status checkRank(int input, int rank, const std::string &shown, SourceLoc loc) {
    const int known = program_.input_ranks[input];
    if (known >= 0 && known != rank) {
      std::string before = program_.input_locs[input].line > 0
                               ? " at " + locString(program_.input_locs[input])
                               : " (its rank is fixed by the op)";
      return where_.error(loc, "input '" + shown + "' is read with " + std::to_string(rank) +
                                   " ind" + (rank == 1 ? "ex" : "ices") + " here but with " +
                                   std::to_string(known) + before + ": expected " +
                                   std::to_string(known));
    }
    fixRank(input, rank, loc);
    return Status::ok();
  }

  // A subexpression that must be a value (not a condition).
  Expected<ExprPtr> value(const SyntaxPtr &s) {
    KILN_ASSIGN_OR_RETURN(ExprPtr e, check(s));
    if (e->isBool())
      return where_.error(s->loc, "expected a value, got the comparison '" +
                                      std::string(binOpText(e->op)) +
                                      "' (a condition is only taken by select(cond, a, b))");
    return e;
  }

  static ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

  Expected<ExprPtr> check(const SyntaxPtr &s) {
    Expr e;
    e.loc = s->loc;
    switch (s->kind) {
    case Syntax::Kind::Number:
      e.kind = ExprKind::Number;
      e.number = s->number;
      return make(std::move(e));
    case Syntax::Kind::Name:
      return name(*s);
    case Syntax::Kind::Subscript:
      return subscript(*s);
    case Syntax::Kind::Call:
      return call(*s);
    case Syntax::Kind::Neg: {
      e.kind = ExprKind::Neg;
      KILN_ASSIGN_OR_RETURN(ExprPtr a, value(s->args[0]));
      e.args = {std::move(a)};
      return make(std::move(e));
    }
    case Syntax::Kind::Binary: {
      e.kind = ExprKind::Binary;
      e.op = s->op;
      KILN_ASSIGN_OR_RETURN(ExprPtr a, value(s->args[0]));
      KILN_ASSIGN_OR_RETURN(ExprPtr b, value(s->args[1]));
      e.args = {std::move(a), std::move(b)};
      return make(std::move(e));
    }
    }
    return where_.error(s->loc, "unexpected expression");
  }

  Expected<ExprPtr> name(const Syntax &s) {
    Expr e;
    e.loc = s.loc;
    if (int v = lookup(s.name); v >= 0) {
      e.kind = ExprKind::Index;
      e.id = v;
      return make(std::move(e));
    }
    if (int a = attrOf(s.name); a >= 0) {
      e.kind = ExprKind::Attr;
      e.id = a;
      return make(std::move(e));
    }
    if (const auto *a = anyAttr(s.name))
      return where_.error(s.loc, "attribute '" + s.name + "' is " +
                                     std::string(attrKindName(a->second)) +
                                     ": expected a float, int or bool attribute, the only kinds "
                                     "the compute reads");
    if (int i = inputOf(s.name); i >= 0) {
      KILN_RETURN_IF_ERROR(checkRank(i, 0, s.name, s.loc));
      e.kind = ExprKind::Input;
      e.id = i;
      return make(std::move(e));
    }
    if (indexOf(sig_.outputs, s.name) >= 0)
      return where_.error(s.loc, "output '" + s.name +
                                     "' cannot be read on the right-hand side: expected an "
                                     "input, an attribute or an index variable");
    if (parseFn(s.name) || s.name == "sum" || s.name == "select")
      return where_.error(s.loc,
                          "'" + s.name + "' is a function: expected a call " + s.name + "(...)");
    return where_.error(s.loc, "unknown name '" + s.name + "': expected an input (" +
                                   joined(sig_.inputs) + "), an attribute (" + attrNames() +
                                   ") or an index variable (" + scopeNames() + ")");
  }

  std::string attrNames() const {
    std::vector<std::string> names;
    for (const AttrRef &a : program_.attrs)
      names.push_back(a.name);
    return joined(names);
  }

  Expected<ExprPtr> subscript(const Syntax &s) {
    const int input = inputOf(s.name);
    if (input < 0) {
      if (indexOf(sig_.outputs, s.name) >= 0)
        return where_.error(s.loc, "output '" + s.name +
                                       "' cannot be read on the right-hand side: expected an "
                                       "input (" +
                                       joined(sig_.inputs) + ")");
      if (lookup(s.name) >= 0 || anyAttr(s.name))
        return where_.error(s.loc, "'" + s.name +
                                       "' is not an input, so it takes no [...]: "
                                       "expected an input (" +
                                       joined(sig_.inputs) + ")");
      return where_.error(s.loc, "unknown input '" + s.name +
                                     "': expected one of the op's inputs (" + joined(sig_.inputs) +
                                     ")");
    }
    KILN_RETURN_IF_ERROR(checkRank(input, static_cast<int>(s.indices.size()), s.name, s.loc));
    Expr e;
    e.kind = ExprKind::Input;
    e.loc = s.loc;
    e.id = input;
    for (size_t d = 0; d < s.indices.size(); ++d) {
      const NameAt &idx = s.indices[d];
      const int v = lookup(idx.name);
      if (v < 0) {
        if (inputOf(idx.name) >= 0 || anyAttr(idx.name))
          return where_.error(idx.loc, "'" + idx.name +
                                           "' is not an index variable: expected a "
                                           "variable here (" +
                                           scopeNames() + ")");
        return where_.error(idx.loc, "unknown index variable '" + idx.name + "' in " + s.name +
                                         "[...]: expected one of " + scopeNames() +
                                         ", or a reduction such as sum(" + idx.name +
                                         ", ...) around it");
      }
      stmt_->vars[v].uses.push_back({input, static_cast<int>(d), idx.loc});
      e.indices.push_back(v);
    }
    return make(std::move(e));
  }

  // max(k, e) and min(k, e) reduce when k is a bare name that means nothing yet.
  bool isReductionCall(const Syntax &s) const {
    if (s.name == "sum")
      return true;
    if ((s.name != "max" && s.name != "min") || s.args.size() != 2 ||
        s.args[0]->kind != Syntax::Kind::Name)
      return false;
    const std::string &n = s.args[0]->name;
    return lookup(n) < 0 && !anyAttr(n) && inputOf(n) < 0;
  }

  Expected<ExprPtr> call(const Syntax &s) {
    if (isReductionCall(s))
      return reduction(s);
    Expr e;
    e.loc = s.loc;
    if (s.name == "select") {
      if (s.args.size() != 3)
        return where_.error(s.loc, "select takes 3 arguments (cond, a, b), got " +
                                       std::to_string(s.args.size()));
      KILN_ASSIGN_OR_RETURN(ExprPtr c, check(s.args[0]));
      if (!c->isBool())
        return where_.error(s.args[0]->loc, "expected a comparison such as x[i] > 0 as the "
                                            "condition of select");
      KILN_ASSIGN_OR_RETURN(ExprPtr a, value(s.args[1]));
      KILN_ASSIGN_OR_RETURN(ExprPtr b, value(s.args[2]));
      e.kind = ExprKind::Select;
      e.args = {std::move(c), std::move(a), std::move(b)};
      return make(std::move(e));
    }
    std::optional<Fn> fn = parseFn(s.name);
    if (!fn)
      return where_.error(s.loc,
                          "unknown function '" + s.name + "': expected one of " + functionList());
    if (s.args.size() != fnArity(*fn))
      return where_.error(s.loc, s.name + " takes " + std::to_string(fnArity(*fn)) + " argument" +
                                     (fnArity(*fn) == 1 ? "" : "s") + ", got " +
                                     std::to_string(s.args.size()));
    e.kind = ExprKind::Call;
    e.fn = *fn;
    for (const SyntaxPtr &a : s.args) {
      KILN_ASSIGN_OR_RETURN(ExprPtr arg, value(a));
      e.args.push_back(std::move(arg));
    }
    return make(std::move(e));
  }

  Expected<ExprPtr> reduction(const Syntax &s) {
    if (s.args.size() != 2 || s.args[0]->kind != Syntax::Kind::Name)
      return where_.error(s.loc, "expected " + s.name +
                                     "(k, expr) with a new index variable k, "
                                     "as in " +
                                     s.name + "(k, x[i, k])");
    const NameAt var{s.args[0]->name, s.args[0]->loc};
    if (int v = lookup(var.name); v >= 0) {
      const IndexVar &outer = stmt_->vars[v];
      if (!outer.reduction)
        return where_.error(var.loc, "reduction variable '" + var.name +
                                         "' is an index of output '" + sig_.outputs[stmt_->output] +
                                         "': expected a variable of its own, not in the "
                                         "output's index list");
      return where_.error(var.loc, "reduction variable '" + var.name +
                                       "' is already bound by the enclosing reduction at " +
                                       locString(outer.loc) + ": expected a new name");
    }
    KILN_RETURN_IF_ERROR(checkNewName(var, "a reduction"));
    stmt_->vars.push_back(IndexVar{var.name, true, var.loc, {}});
    const int id = static_cast<int>(stmt_->vars.size()) - 1;
    scope_.push_back(id);
    auto body = value(s.args[1]);
    scope_.pop_back();
    if (!body)
      return body.error();
    if (stmt_->vars[id].uses.empty())
      return where_.error(var.loc, "reduction variable '" + var.name + "' indexes no input in " +
                                       s.name + "(" + var.name +
                                       ", ...), so its extent is unknown: expected it in an "
                                       "input's indices, as in x[..., " +
                                       var.name + ", ...]");
    Expr e;
    e.kind = ExprKind::Reduce;
    e.loc = s.loc;
    e.id = id;
    e.reduce = s.name == "sum" ? ReduceOp::Sum : s.name == "max" ? ReduceOp::Max : ReduceOp::Min;
    e.args = {std::move(*body)};
    return make(std::move(e));
  }

  const Signature &sig_;
  Where where_;
  Program program_;
  Statement *stmt_ = nullptr;
  std::vector<int> scope_;
};

} // namespace

Expected<Program> checkProgram(const std::vector<SyntaxStatement> &statements,
                               const Signature &signature) {
  return Checker(signature).run(statements);
}

Expected<Program> compileCompute(const SourceText &source, const Signature &signature) {
  KILN_ASSIGN_OR_RETURN(std::vector<SyntaxStatement> statements,
                        parseCompute(source, Where{signature.file, signature.op}));
  return checkProgram(statements, signature);
}

} // namespace kiln::ops::custom
