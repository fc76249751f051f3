// ONNX's Einsum for the equations shaped like a matmul: one or two
// operands, each letter at most once per operand. Letters of both operands
// and the output are batch axes, of both operands only contracted, of one
// operand and the output rows or columns; a letter in one operand alone is
// summed first. The operands are transposed and reshaped to [B, M, K] and
// [B, K, N], multiplied (MatMul when there is no batch, else BatchMatMul),
// and the product reshaped and transposed to the output's letters. Any
// other equation (a diagonal, a repeated letter, three operands) is E12011.
#include <algorithm>
#include <map>
#include <numeric>

#include "compiler/frontend/onnx/onnx_context.h"

namespace kiln::frontend::onnx_import {
namespace {

struct Equation {
  std::vector<std::string> inputs; // one letter per axis ("..." expanded)
  std::string output;
};

// Parses `text` for operands of ranks `ranks`; "..." stands for the axes no
// letter names, as upper-case letters shared by the operands. An empty
// string names what is wrong.
Expected<Equation> parseEquation(const std::string &text, const std::vector<int64_t> &ranks) {
  std::string eq;
  for (char ch : text)
    if (ch != ' ')
      eq += ch;
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  Equation e;
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    e.inputs.push_back(lhs.substr(at, comma == std::string::npos ? comma : comma - at));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  if (e.inputs.size() != ranks.size())
    return Error("it names " + std::to_string(e.inputs.size()) + " operands; the node has " +
                 std::to_string(ranks.size()));
  int64_t ellipsis = -1;
  auto expand = [&](std::string &term, int64_t rank) -> Status {
    const size_t dots = term.find("...");
    const int64_t named = static_cast<int64_t>(term.size()) - (dots == std::string::npos ? 0 : 3);
    if (std::count(term.begin(), term.end(), '.') != (dots == std::string::npos ? 0 : 3))
      return Error("'.' appears outside one \"...\"");
    for (char ch : term)
      if (ch != '.' && !std::islower(static_cast<unsigned char>(ch)) &&
          !std::isupper(static_cast<unsigned char>(ch)))
        return Error("'" + std::string(1, ch) + "' is not a letter");
    if (dots == std::string::npos && named != rank)
      return Error("a term names " + std::to_string(named) + " axes of an operand of rank " +
                   std::to_string(rank));
    if (dots == std::string::npos)
      return Status::ok();
    if (ellipsis >= 0 && ellipsis != rank - named)
      return Error("the operands' \"...\" cover different numbers of axes");
    ellipsis = rank - named;
    if (ellipsis < 0 || ellipsis > 10)
      return Error("\"...\" covers " + std::to_string(ellipsis) + " axes");
    std::string batch;
    for (int64_t i = 0; i < ellipsis; ++i)
      batch += static_cast<char>('0' + i); // stands for one "..." axis
    term.replace(dots, 3, batch);
    return Status::ok();
  };
  for (size_t i = 0; i < e.inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(expand(e.inputs[i], ranks[i]));
  if (arrow != std::string::npos) {
    e.output = eq.substr(arrow + 2);
    const size_t dots = e.output.find("...");
    if (dots != std::string::npos) {
      std::string batch;
      for (int64_t i = 0; i < std::max<int64_t>(ellipsis, 0); ++i)
        batch += static_cast<char>('0' + i);
      e.output.replace(dots, 3, batch);
    }
  } else { // implicit: "..." first, then the letters used once, in order
    std::string all;
    for (const auto &t : e.inputs)
      all += t;
    for (char ch : all)
      if (std::isdigit(static_cast<unsigned char>(ch)) && e.output.find(ch) == std::string::npos)
        e.output += ch;
    std::string once;
    for (char ch : all)
      if (!std::isdigit(static_cast<unsigned char>(ch)) &&
          std::count(all.begin(), all.end(), ch) == 1)
        once += ch;
    std::sort(once.begin(), once.end());
    e.output += once;
  }
  for (const std::string &t : e.inputs)
    for (char ch : t)
      if (std::count(t.begin(), t.end(), ch) > 1)
        return Error("letter '" + std::string(1, ch) + "' repeats in one operand (a diagonal)");
  for (char ch : e.output) {
    if (std::count(e.output.begin(), e.output.end(), ch) > 1)
      return Error("letter '" + std::string(1, ch) + "' repeats in the output");
    bool found = false;
    for (const auto &t : e.inputs)
      found = found || t.find(ch) != std::string::npos;
    if (!found)
      return Error("output letter '" + std::string(1, ch) + "' names no operand's axis");
  }
  return e;
}

// Sums `x`'s axes whose letters are in none of `keep` and drops them from
// `letters`.
ValueId sumOut(Converter &c, ValueId x, std::string &letters, const std::string &keep,
               const std::string &suffix) {
  std::vector<int64_t> axes;
  std::string kept;
  for (size_t a = 0; a < letters.size(); ++a) {
    if (keep.find(letters[a]) == std::string::npos)
      axes.push_back(static_cast<int64_t>(a));
    else
      kept += letters[a];
  }
  letters = kept;
  if (axes.empty())
    return x;
  return c.create("ReduceSum", {x}, {{"axes", axes}, {"keepdims", false}}, suffix);
}

// `x` (axes named by `from`) transposed to the order of `to`.
ValueId permute(Converter &c, ValueId x, const std::string &from, const std::string &to,
                const std::string &suffix) {
  std::vector<int64_t> perm;
  for (char ch : to)
    perm.push_back(static_cast<int64_t>(from.find(ch)));
  std::vector<int64_t> identity(perm.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (perm == identity)
    return x;
  return c.create("Transpose", {x}, {{"perm", perm}}, suffix);
}

Status convertEinsum(Converter &c) {
  const std::string text = c.stringAttr("equation", "");
  std::vector<ValueId> xs;
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(ValueId x, c.value(i));
    if (!isFloat(c.builder().dtype(x)))
      return c.unsupportedType("Einsum of " + std::string(dtypeName(c.builder().dtype(x))) +
                               " tensors is not supported (float, float16 and bfloat16 are)");
    xs.push_back(x);
    ranks.push_back(static_cast<int64_t>(c.builder().shape(x).size()));
  }
  auto refuse = [&](const std::string &why) {
    return c.unsupported("equation '" + text + "' is not supported: " + why +
                         " (kiln reads matmul-shaped equations: one or two operands, each "
                         "letter once per operand, e.g. \"bij,bjk->bik\")");
  };
  if (xs.empty() || xs.size() > 2)
    return refuse(std::to_string(xs.size()) + " operands");
  auto parsed = parseEquation(text, ranks);
  if (!parsed)
    return refuse(parsed.error().message());
  Equation e = *parsed;
  ops::OpBuilder &b = c.builder();
  const std::string other = xs.size() == 2 ? e.inputs[1] : "";
  ValueId a = sumOut(c, xs[0], e.inputs[0], e.output + other, "sum_a");
  if (xs.size() == 1) {
    c.setOutput(0, permute(c, a, e.inputs[0], e.output, "permute"));
    return Status::ok();
  }
  ValueId bb = sumOut(c, xs[1], e.inputs[1], e.output + e.inputs[0], "sum_b");
  const std::string &la = e.inputs[0], &lb = e.inputs[1];
  std::string batch, m, n, k;
  for (char ch : la)
    (lb.find(ch) == std::string::npos         ? m
     : e.output.find(ch) == std::string::npos ? k
                                              : batch) += ch;
  for (char ch : lb)
    if (la.find(ch) == std::string::npos)
      n += ch;
  std::map<char, int64_t> sizes; // read before the operands are permuted
  for (size_t i = 0; i < lb.size(); ++i)
    sizes[lb[i]] = b.shape(bb)[i];
  for (size_t i = 0; i < la.size(); ++i)
    sizes[la[i]] = b.shape(a)[i];
  for (char ch : batch + k)
    if (b.shape(a)[la.find(ch)] != b.shape(bb)[lb.find(ch)])
      return c.invalid("equation '" + text + "': axis '" + std::string(1, ch) +
                       "' has different sizes in the two operands");
  auto prod = [&](const std::string &letters) {
    int64_t p = 1;
    for (char ch : letters)
      p *= sizes[ch];
    return p;
  };
  const int64_t B = prod(batch), M = prod(m), K = prod(k), N = prod(n);
  a = permute(c, a, la, batch + m + k, "permute_a");
  bb = permute(c, bb, lb, batch + k + n, "permute_b");
  ValueId y = batch.empty()
                  ? c.create("MatMul", {c.reshape(a, {M, K}), c.reshape(bb, {K, N})})
                  : c.create("BatchMatMul", {c.reshape(a, {B, M, K}), c.reshape(bb, {B, K, N})});
  Shape full;
  for (char ch : batch + m + n)
    full.push_back(sizes[ch]);
  y = c.reshape(y, full);
  c.setOutput(0, permute(c, y, batch + m + n, e.output, "permute"));
  return Status::ok();
}

} // namespace

KILN_REGISTER_ONNX_OP("Einsum", convertEinsum);

} // namespace kiln::frontend::onnx_import
