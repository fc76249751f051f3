#include "ops/custom/parser.h"

#include "ops/custom/lexer.h"

namespace kiln::ops::custom {
namespace {

// Limits on one statement. Real computes are a few dozen terms; the checker,
// the evaluator and differentiation walk the tree recursively, and the
// derivative of a product grows with the square of its factors, so a
// statement of 10^5 parentheses or terms would overflow the stack or run
// for minutes.
constexpr int kMaxNesting = 64; // parentheses, calls and unary minus
constexpr int kMaxTerms = 256;  // names, numbers, calls and operators

class Parser {
public:
  Parser(std::vector<Token> tokens, const Where &where)
      : tokens_(std::move(tokens)), where_(where) {}

  Expected<std::vector<SyntaxStatement>> compute() {
    std::vector<SyntaxStatement> out;
    if (peek().kind == TokenKind::End)
      return where_.error(peek().loc,
                          "the compute is empty: expected a statement such as y[i, j] = x[i, j]");
    while (peek().kind != TokenKind::End) {
      KILN_ASSIGN_OR_RETURN(SyntaxStatement s, statement());
      out.push_back(std::move(s));
      if (peek().is(";")) {
        while (peek().is(";"))
          next();
      } else if (peek().kind != TokenKind::End && !peek().line_start) {
        return fail("an operator, ';' or a new line");
      }
    }
    return out;
  }

private:
  const Token &peek() const { return tokens_[pos_]; }
  const Token &next() {
    const Token &t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size())
      ++pos_;
    return t;
  }
  Error fail(const std::string &expected) const {
    return where_.error(peek().loc, "expected " + expected + ", got " + peek().describe());
  }

  Expected<SyntaxStatement> statement() {
    if (peek().kind != TokenKind::Name)
      return fail("the name of an output, as in y[i, j] = ...");
    SyntaxStatement s;
    s.output = {peek().text, peek().loc};
    next();
    if (peek().is("[")) {
      next();
      if (!peek().is("]")) {
        for (;;) {
          if (peek().kind != TokenKind::Name)
            return fail("an index variable of output '" + s.output.name + "'");
          s.indices.push_back({peek().text, peek().loc});
          next();
          if (peek().is(","))
            next();
          else if (peek().is("]"))
            break;
          else
            return fail("',' or ']' after index '" + s.indices.back().name + "' of output '" +
                        s.output.name + "'");
        }
      }
      next(); // ']'
    }
    if (!peek().is("="))
      return fail(s.indices.empty() ? "'[' or '=' after output '" + s.output.name + "'"
                                    : "'=' after the indices of output '" + s.output.name + "'");
    next();
    terms_ = 0;
    KILN_ASSIGN_OR_RETURN(s.rhs, expr());
    return s;
  }

  // Counts a node of the statement against kMaxTerms.
  Status addTerm(SourceLoc loc) {
    if (++terms_ > kMaxTerms)
      return where_.error(loc, "the statement has more than " + std::to_string(kMaxTerms) +
                                   " terms and operators; split the op into smaller ones");
    return Status::ok();
  }

  // Enters one level of nesting, refusing more than kMaxNesting.
  Status enter(SourceLoc loc) {
    if (++depth_ > kMaxNesting)
      return where_.error(loc, "the expression nests deeper than " + std::to_string(kMaxNesting) +
                                   " levels of parentheses, calls and '-'");
    return Status::ok();
  }
  struct Leave {
    int &depth;
    ~Leave() { --depth; }
  };

  static SyntaxPtr binary(BinOp op, SourceLoc loc, SyntaxPtr a, SyntaxPtr b) {
    auto n = std::make_shared<Syntax>();
    n->kind = Syntax::Kind::Binary;
    n->op = op;
    n->loc = loc;
    n->args = {std::move(a), std::move(b)};
    return n;
  }

  Expected<SyntaxPtr> expr() {
    Leave leave{depth_};
    KILN_RETURN_IF_ERROR(enter(peek().loc));
    KILN_ASSIGN_OR_RETURN(SyntaxPtr a, additive());
    static const std::pair<const char *, BinOp> kCompare[] = {{"<", BinOp::Lt},  {"<=", BinOp::Le},
                                                              {">", BinOp::Gt},  {">=", BinOp::Ge},
                                                              {"==", BinOp::Eq}, {"!=", BinOp::Ne}};
    for (const auto &[text, op] : kCompare) {
      if (peek().is(text)) {
        SourceLoc loc = next().loc;
        KILN_RETURN_IF_ERROR(addTerm(loc));
        KILN_ASSIGN_OR_RETURN(SyntaxPtr b, additive());
        return binary(op, loc, std::move(a), std::move(b));
      }
    }
    return a;
  }

  Expected<SyntaxPtr> additive() {
    KILN_ASSIGN_OR_RETURN(SyntaxPtr a, term());
    while (peek().is("+") || peek().is("-")) {
      const BinOp op = peek().is("+") ? BinOp::Add : BinOp::Sub;
      SourceLoc loc = next().loc;
      KILN_RETURN_IF_ERROR(addTerm(loc));
      KILN_ASSIGN_OR_RETURN(SyntaxPtr b, term());
      a = binary(op, loc, std::move(a), std::move(b));
    }
    return a;
  }

  Expected<SyntaxPtr> term() {
    KILN_ASSIGN_OR_RETURN(SyntaxPtr a, unary());
    while (peek().is("*") || peek().is("/")) {
      const BinOp op = peek().is("*") ? BinOp::Mul : BinOp::Div;
      SourceLoc loc = next().loc;
      KILN_RETURN_IF_ERROR(addTerm(loc));
      KILN_ASSIGN_OR_RETURN(SyntaxPtr b, unary());
      a = binary(op, loc, std::move(a), std::move(b));
    }
    return a;
  }

  Expected<SyntaxPtr> unary() {
    if (peek().is("-")) {
      auto n = std::make_shared<Syntax>();
      n->kind = Syntax::Kind::Neg;
      n->loc = next().loc;
      Leave leave{depth_};
      KILN_RETURN_IF_ERROR(enter(n->loc));
      KILN_RETURN_IF_ERROR(addTerm(n->loc));
      KILN_ASSIGN_OR_RETURN(SyntaxPtr a, unary());
      n->args = {std::move(a)};
      return SyntaxPtr(n);
    }
    return primary();
  }

  Expected<SyntaxPtr> primary() {
    auto n = std::make_shared<Syntax>();
    n->loc = peek().loc;
    if (!peek().is("("))
      KILN_RETURN_IF_ERROR(addTerm(n->loc));
    if (peek().kind == TokenKind::Number) {
      n->kind = Syntax::Kind::Number;
      n->number = next().number;
      return SyntaxPtr(n);
    }
    if (peek().is("(")) {
      next();
      KILN_ASSIGN_OR_RETURN(SyntaxPtr inner, expr());
      if (!peek().is(")"))
        return fail("')' to close the '(' at " + locString(n->loc));
      next();
      return inner;
    }
    if (peek().kind != TokenKind::Name)
      return fail("a number, a name or '('");
    n->name = next().text;
    if (peek().is("[")) {
      n->kind = Syntax::Kind::Subscript;
      next();
      if (peek().is("]"))
        return fail("an index variable in " + n->name + "[...] (a rank-0 input is read as '" +
                    n->name + "')");
      for (;;) {
        if (peek().kind != TokenKind::Name)
          return fail("an index variable in " + n->name + "[...] (indices are names such as i)");
        n->indices.push_back({peek().text, peek().loc});
        next();
        if (peek().is(","))
          next();
        else if (peek().is("]"))
          break;
        else
          return fail("',' or ']' after index '" + n->indices.back().name + "' of " + n->name);
      }
      next(); // ']'
      return SyntaxPtr(n);
    }
    if (peek().is("(")) {
      n->kind = Syntax::Kind::Call;
      next();
      if (peek().is(")"))
        return fail("an argument of " + n->name + "(...)");
      for (;;) {
        KILN_ASSIGN_OR_RETURN(SyntaxPtr arg, expr());
        n->args.push_back(std::move(arg));
        if (peek().is(","))
          next();
        else if (peek().is(")"))
          break;
        else
          return fail("',' or ')' in the arguments of " + n->name);
      }
      next(); // ')'
      return SyntaxPtr(n);
    }
    n->kind = Syntax::Kind::Name;
    return SyntaxPtr(n);
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const Where &where_;
  int depth_ = 0; // expressions and negations being parsed
  int terms_ = 0; // nodes of the current statement
};

} // namespace

Expected<std::vector<SyntaxStatement>> parseCompute(const SourceText &source, const Where &where) {
  KILN_ASSIGN_OR_RETURN(std::vector<Token> tokens, lex(source, where));
  return Parser(std::move(tokens), where).compute();
}

} // namespace kiln::ops::custom
