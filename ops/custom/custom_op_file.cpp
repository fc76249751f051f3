#include "ops/custom/custom_op_file.h"

#include <algorithm>

#include <tinyxml2.h>

#include "ops/custom/checker.h"
#include "ops/custom/derivative.h"

namespace kiln::ops::custom {
namespace {

std::string indexList(const Statement &st, const std::vector<int> &vars) {
  std::string s = "[";
  for (size_t d = 0; d < vars.size(); ++d)
    s += (d ? ", " : "") + st.vars[vars[d]].name;
  return s + "]";
}

// Checks the operands a custom op may have and fills in default dtypes.
Status checkOperands(OpDef &def, const Where &where) {
  if (def.inputs.empty())
    return where.error("a custom op needs at least one input (its outputs take their shapes "
                       "from the inputs)");
  const std::vector<DType> floats = {DType::F32, DType::F16, DType::BF16};
  for (OperandDef &in : def.inputs) {
    if (in.optional || in.variadic)
      return where.error("input '" + in.name + "' is " + (in.optional ? "optional" : "variadic") +
                         ": custom ops take plain inputs");
    if (in.dtypes.empty())
      in.dtypes = floats;
    for (DType d : in.dtypes)
      if (!isFloat(d))
        return where.error("input '" + in.name + "' takes " + std::string(dtypeName(d)) +
                           ": custom ops compute in f32 and take f32, f16 or bf16");
  }
  for (const OperandDef &out : def.outputs) {
    if (out.variadic)
      return where.error("output '" + out.name +
                         "' is variadic: custom ops have one statement "
                         "per output");
    if (out.dtypes.size() > 1)
      return where.error("output '" + out.name +
                         "' lists several dtypes: expected one, or none to take the inputs' dtype");
    for (DType d : out.dtypes)
      if (!isFloat(d))
        return where.error("output '" + out.name + "' is " + std::string(dtypeName(d)) +
                           ": custom ops produce f32, f16 or bf16");
  }
  return Status::ok();
}

Signature signatureOf(const OpDef &def, const std::string &path, SourceLoc loc) {
  Signature sig;
  sig.op = def.name;
  sig.file = path;
  for (const OperandDef &in : def.inputs)
    sig.inputs.push_back(in.name);
  for (const OperandDef &out : def.outputs)
    sig.outputs.push_back(out.name);
  for (const AttrDef &a : def.attrs)
    sig.attrs.push_back({a.name, a.kind});
  sig.loc = loc;
  return sig;
}

// The element's text with file positions; tinyxml2's text when the raw
// element cannot be found (columns then count from each line's start).
SourceText textOf(std::string_view xml, const tinyxml2::XMLElement *e, size_t &cursor) {
  size_t from = std::max(cursor, lineOffset(xml, e->GetLineNum()));
  if (auto text = elementText(xml, e->Name(), from)) {
    cursor = from;
    return *text;
  }
  const tinyxml2::XMLNode *child = e->FirstChild();
  return positionedText(e->GetText() ? e->GetText() : "",
                        {child ? child->GetLineNum() : e->GetLineNum(), 1});
}

} // namespace

Status checkKind(const OpDef &def, const Program &program) {
  if (def.kind != OpKind::Elementwise && def.kind != OpKind::Broadcast)
    return Status::ok();
  const Where where = program.where();
  const std::string kind(opKindName(def.kind));
  for (const Statement &st : program.statements) {
    if (const Expr *r = firstReduce(st.body))
      return where.error(r->loc, "the op is " + kind + ", but its compute reduces with " +
                                     std::string(reduceName(r->reduce)) + "(" +
                                     st.vars[r->id].name + ", ...): expected kind reduce");
    const std::string out = program.outputs[st.output] + indexList(st, st.out_vars);
    for (const Expr *r : inputReads(st.body)) {
      const std::string read = program.inputs[r->id] + indexList(st, r->indices);
      if (def.kind == OpKind::Elementwise && r->indices != st.out_vars)
        return where.error(r->loc, "the op is elementwise, but it reads " + read + " for " + out +
                                       ": expected every input read at the output's indices "
                                       "(or kind broadcast, injective or opaque)");
      if (def.kind == OpKind::Broadcast && !isSubsequence(r->indices, st.out_vars))
        return where.error(r->loc, "the op is broadcast, but it reads " + read + " for " + out +
                                       ": expected the output's indices or some of them in "
                                       "order (or kind injective or opaque)");
    }
  }
  return Status::ok();
}

Expected<std::vector<CustomOpSpec>> parseCustomOpFile(std::string_view xml,
                                                      const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::vector<OpDef> defs, parseOpDefs(xml, path));
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS)
    return Error(path + ": invalid XML: " + doc.ErrorStr());
  std::vector<CustomOpSpec> specs;
  size_t cursor = 0;
  size_t k = 0;
  for (const tinyxml2::XMLElement *e = doc.RootElement()->FirstChildElement("op"); e;
       e = e->NextSiblingElement("op"), ++k) {
    CustomOpSpec spec;
    spec.def = defs.at(k);
    const Where where{path + ":" + std::to_string(e->GetLineNum()), spec.def.name};
    KILN_RETURN_IF_ERROR(checkOperands(spec.def, where));

    std::vector<const tinyxml2::XMLElement *> computes, gradients;
    for (const tinyxml2::XMLElement *c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      const std::string tag = c->Name();
      if (tag == "compute")
        computes.push_back(c);
      else if (tag == "gradient")
        gradients.push_back(c);
    }
    if (computes.empty())
      return where.error("a custom op needs a <compute> element: one statement per output, as in "
                         "<compute>y[i, j] = x[i, j] * 2</compute>");
    if (computes.size() > 1)
      return Where{path + ":" + std::to_string(computes[1]->GetLineNum()), spec.def.name}.error(
          "a second <compute>: expected one, holding one statement per output (separated by ';' "
          "or new lines)");

    // Positions follow document order, so compute and gradients are read in it.
    std::vector<std::pair<const tinyxml2::XMLElement *, SourceText>> texts;
    for (const tinyxml2::XMLElement *c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      const std::string tag = c->Name();
      if (tag == "compute" || tag == "gradient")
        texts.emplace_back(c, textOf(xml, c, cursor));
    }
    auto textFor = [&](const tinyxml2::XMLElement *c) -> const SourceText & {
      for (const auto &[el, text] : texts)
        if (el == c)
          return text;
      return texts.front().second;
    };

    const SourceText &compute = textFor(computes[0]);
    Signature sig = signatureOf(spec.def, path, compute.at(0));
    KILN_ASSIGN_OR_RETURN(Program program, compileCompute(compute, sig));
    KILN_RETURN_IF_ERROR(checkKind(spec.def, program));
    auto shared = std::make_shared<const Program>(std::move(program));

    for (const tinyxml2::XMLElement *g : gradients) {
      const Where gwhere{path + ":" + std::to_string(g->GetLineNum()), spec.def.name};
      const char *input = g->Attribute("input");
      if (!input || !*input)
        return gwhere.error("<gradient> needs input=\"<name of the input>\"");
      auto it = std::find(sig.inputs.begin(), sig.inputs.end(), std::string(input));
      if (it == sig.inputs.end())
        return gwhere.error("<gradient input=\"" + std::string(input) +
                            "\"> names no input of the op (inputs: " +
                            [&] {
                              std::string s;
                              for (const std::string &n : sig.inputs)
                                s += (s.empty() ? "" : ", ") + n;
                              return s;
                            }() +
                            ")");
      const int index = static_cast<int>(it - sig.inputs.begin());
      if (spec.gradients.count(index))
        return gwhere.error("a second <gradient input=\"" + std::string(input) +
                            "\">: expected one per input");
      KILN_ASSIGN_OR_RETURN(Program grad, gradientProgram(*shared, index));
      Signature gsig;
      gsig.op = spec.def.name;
      gsig.file = path;
      gsig.inputs = grad.inputs;
      for (int r : grad.input_ranks)
        gsig.ranks.push_back(r);
      gsig.outputs = grad.outputs;
      gsig.attrs = sig.attrs;
      gsig.like_input = {index};
      const std::string dy = "dy";
      if (shared->outputs.size() == 1 &&
          std::find(gsig.inputs.begin(), gsig.inputs.end(), dy) == gsig.inputs.end() &&
          gsig.outputs[0] != dy)
        gsig.input_aliases[dy] = static_cast<int>(shared->inputs.size());
      const SourceText &text = textFor(g);
      gsig.loc = text.at(0);
      KILN_ASSIGN_OR_RETURN(Program checked, compileCompute(text, gsig));
      spec.gradients[index] = DeclaredGradient{std::move(checked.statements.at(0)), gsig.loc};
    }
    spec.program = std::move(shared);
    specs.push_back(std::move(spec));
  }
  return specs;
}

} // namespace kiln::ops::custom
