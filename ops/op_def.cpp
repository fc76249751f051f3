#include "ops/op_def.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include <tinyxml2.h>

namespace kiln::ops {

std::string_view opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::Elementwise:
    return "elementwise";
  case OpKind::Broadcast:
    return "broadcast";
  case OpKind::Injective:
    return "injective";
  case OpKind::Reduce:
    return "reduce";
  case OpKind::OutElemwiseFusable:
    return "out_elemwise_fusable";
  case OpKind::Opaque:
    return "opaque";
  case OpKind::Collective:
    return "collective";
  }
  return "?";
}

std::optional<OpKind> parseOpKind(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(OpKind::Collective); ++k)
    if (opKindName(static_cast<OpKind>(k)) == name)
      return static_cast<OpKind>(k);
  return std::nullopt;
}

const AttrDef *OpDef::findAttr(std::string_view attr_name) const {
  for (const AttrDef &a : attrs)
    if (a.name == attr_name)
      return &a;
  return nullptr;
}

size_t OpDef::minInputs() const {
  size_t n = 0;
  for (const OperandDef &in : inputs)
    if (!in.optional)
      ++n;
  return n;
}

std::optional<size_t> OpDef::maxInputs() const {
  for (const OperandDef &in : inputs)
    if (in.variadic)
      return std::nullopt;
  return inputs.size();
}

namespace {

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream ss{std::string(text)};
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t\n");
    size_t e = item.find_last_not_of(" \t\n");
    if (b != std::string::npos)
      out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

bool parseInt(std::string_view s, int64_t &out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parseDouble(const std::string &s, double &out) {
  if (s == "inf" || s == "-inf") {
    out = s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

} // namespace

// Parses the text form of an attribute value of `kind`.
static std::optional<AttrValue> parseAttrText(AttrKind kind, const std::string &text) {
  switch (kind) {
  case AttrKind::Bool:
    if (text == "true")
      return AttrValue(true);
    if (text == "false")
      return AttrValue(false);
    return std::nullopt;
  case AttrKind::Int: {
    int64_t v;
    return parseInt(text, v) ? std::optional<AttrValue>(v) : std::nullopt;
  }
  case AttrKind::Float: {
    double v;
    return parseDouble(text, v) ? std::optional<AttrValue>(v) : std::nullopt;
  }
  case AttrKind::String:
    return AttrValue(text);
  case AttrKind::Ints: {
    std::vector<int64_t> out;
    for (const std::string &item : splitList(text)) {
      int64_t v;
      if (!parseInt(item, v))
        return std::nullopt;
      out.push_back(v);
    }
    return AttrValue(out);
  }
  case AttrKind::Floats: {
    std::vector<double> out;
    for (const std::string &item : splitList(text)) {
      double v;
      if (!parseDouble(item, v))
        return std::nullopt;
      out.push_back(v);
    }
    return AttrValue(out);
  }
  case AttrKind::DType: {
    auto d = parseDType(text);
    return d ? std::optional<AttrValue>(*d) : std::nullopt;
  }
  }
  return std::nullopt;
}

Expected<std::vector<OpDef>> parseOpDefs(std::string_view xml, std::string_view source) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS)
    return Error(std::string(source) + ":" + std::to_string(doc.ErrorLineNum()) +
                 ": invalid XML: " + doc.ErrorStr());
  const tinyxml2::XMLElement *root = doc.RootElement();
  if (!root || std::string_view(root->Name()) != "ops")
    return Error(std::string(source) + ": the root element must be <ops>");

  auto at = [&](const tinyxml2::XMLElement *e) {
    return std::string(source) + ":" + std::to_string(e->GetLineNum());
  };
  std::vector<OpDef> defs;
  for (const tinyxml2::XMLElement *e = root->FirstChildElement(); e; e = e->NextSiblingElement()) {
    if (std::string_view(e->Name()) != "op")
      return Error(at(e) + ": unexpected element <" + e->Name() + "> (expected <op>)");
    OpDef def;
    def.source = at(e);
    const char *name = e->Attribute("name");
    if (!name || !*name)
      return Error(at(e) + ": <op> needs a name");
    def.name = name;
    const std::string where = at(e) + ": op " + def.name;
    const char *kind = e->Attribute("kind");
    auto parsed_kind = kind ? parseOpKind(kind) : std::nullopt;
    if (!parsed_kind)
      return Error(where + ": kind must be one of elementwise, broadcast, injective, reduce, "
                           "out_elemwise_fusable, opaque");
    def.kind = *parsed_kind;
    std::set<std::string> names;
    for (const tinyxml2::XMLElement *c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      const std::string tag = c->Name();
      const std::string cwhere = at(c) + ": op " + def.name;
      if (tag == "summary") {
        def.summary = c->GetText() ? c->GetText() : "";
        continue;
      }
      if (tag == "compute" || tag == "gradient")
        continue; // custom ops: ops/custom/custom_op_file.cpp
      const char *cname = c->Attribute("name");
      if (!cname || !*cname)
        return Error(cwhere + ": <" + tag + "> needs a name");
      if (!names.insert(tag + ":" + cname).second)
        return Error(cwhere + ": duplicate " + tag + " '" + cname + "'");
      if (tag == "input" || tag == "output") {
        OperandDef operand;
        operand.name = cname;
        if (const char *dtypes = c->Attribute("dtypes")) {
          for (const std::string &d : splitList(dtypes)) {
            auto parsed = parseDType(d);
            if (!parsed)
              return Error(cwhere + ": unknown dtype '" + d + "' in " + tag + " '" + cname + "'");
            operand.dtypes.push_back(*parsed);
          }
        }
        operand.optional = c->BoolAttribute("optional", false);
        operand.variadic = c->BoolAttribute("variadic", false);
        auto &list = tag == "input" ? def.inputs : def.outputs;
        if (!list.empty() && list.back().variadic)
          return Error(cwhere + ": only the last " + tag + " may be variadic");
        if (tag == "input" && !operand.optional && !list.empty() && list.back().optional)
          return Error(cwhere + ": a required input cannot follow an optional one");
        list.push_back(std::move(operand));
      } else if (tag == "attr") {
        AttrDef attr;
        attr.name = cname;
        const char *type = c->Attribute("type");
        auto parsed = type ? parseAttrKind(type) : std::nullopt;
        if (!parsed)
          return Error(cwhere + ": attr '" + attr.name +
                       "' needs type bool, int, float, string, ints, floats or dtype");
        attr.kind = *parsed;
        if (const char *def_text = c->Attribute("default")) {
          attr.default_value = parseAttrText(attr.kind, def_text);
          if (!attr.default_value)
            return Error(cwhere + ": attr '" + attr.name + "' default '" + def_text +
                         "' is not a valid " + std::string(attrKindName(attr.kind)));
        }
        if (const char *doc_text = c->Attribute("doc"))
          attr.doc = doc_text;
        def.attrs.push_back(std::move(attr));
      } else {
        return Error(cwhere + ": unexpected element <" + tag + ">");
      }
    }
    if (def.outputs.empty())
      return Error(where + ": an op needs at least one <output>");
    defs.push_back(std::move(def));
  }
  return defs;
}

Status checkInputs(const OpDef &def, const std::vector<TensorType> &inputs,
                   std::string_view where) {
  const std::string w(where);
  if (inputs.size() < def.minInputs() || (def.maxInputs() && inputs.size() > *def.maxInputs())) {
    std::string expected = std::to_string(def.minInputs());
    if (!def.maxInputs())
      expected += " or more";
    else if (*def.maxInputs() != def.minInputs())
      expected += " to " + std::to_string(*def.maxInputs());
    return Error(w + ": op " + def.name + " takes " + expected + " inputs, got " +
                 std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OperandDef &operand = def.inputs[std::min(i, def.inputs.size() - 1)];
    if (!operand.dtypes.empty() && std::find(operand.dtypes.begin(), operand.dtypes.end(),
                                             inputs[i].dtype) == operand.dtypes.end())
      return Error(w + ": input '" + operand.name + "' of " + def.name + " cannot be " +
                   std::string(dtypeName(inputs[i].dtype)));
  }
  return Status::ok();
}

Expected<AttrMap> completeAttrs(const OpDef &def, const AttrMap &attrs, std::string_view where) {
  AttrMap out;
  for (const auto &[key, value] : attrs) {
    const AttrDef *a = def.findAttr(key);
    if (!a)
      return Error(std::string(where) + ": op " + def.name + " has no attribute '" + key + "'");
    AttrValue v = value;
    // An integer literal is accepted where a float is expected.
    if (a->kind == AttrKind::Float && std::holds_alternative<int64_t>(v))
      v = static_cast<double>(std::get<int64_t>(v));
    if (attrKindOf(v) != a->kind)
      return Error(std::string(where) + ": attribute '" + key + "' of " + def.name + " must be " +
                   std::string(attrKindName(a->kind)) + ", got " +
                   std::string(attrKindName(attrKindOf(v))));
    out.set(key, std::move(v));
  }
  for (const AttrDef &a : def.attrs) {
    if (out.has(a.name))
      continue;
    if (!a.default_value)
      return Error(std::string(where) + ": op " + def.name + " requires attribute '" + a.name +
                   "' (" + std::string(attrKindName(a.kind)) + ")");
    out.set(a.name, *a.default_value);
  }
  return out;
}

} // namespace kiln::ops
