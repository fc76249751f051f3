#include "passes/fusion/rules/constraint_parser.h"

namespace kiln::passes::rules {

using nlohmann::json;

namespace {

// An attribute value in the plain JSON form of its kind: true, 3, 0.5, "s",
// [1, 2], [0.5], "f16".
Expected<AttrValue> attrValue(const JsonReader &r, const json &v, const std::string &path,
                              AttrKind kind) {
  switch (kind) {
  case AttrKind::Bool:
    if (!v.is_boolean())
      return r.error(path, "expected true or false");
    return AttrValue(v.get<bool>());
  case AttrKind::Int: {
    KILN_ASSIGN_OR_RETURN(int64_t i, r.integer(v, path));
    return AttrValue(i);
  }
  case AttrKind::Float: {
    KILN_ASSIGN_OR_RETURN(double d, r.number(v, path));
    return AttrValue(d);
  }
  case AttrKind::String: {
    KILN_ASSIGN_OR_RETURN(std::string s, r.asString(v, path));
    return AttrValue(std::move(s));
  }
  case AttrKind::Ints: {
    if (!v.is_array())
      return r.error(path, "expected an array of integers");
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t x, r.integer(v[i], JsonReader::index(path, i)));
      out.push_back(x);
    }
    return AttrValue(std::move(out));
  }
  case AttrKind::Floats: {
    if (!v.is_array())
      return r.error(path, "expected an array of numbers");
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(double x, r.number(v[i], JsonReader::index(path, i)));
      out.push_back(x);
    }
    return AttrValue(std::move(out));
  }
  case AttrKind::DType: {
    auto d = v.is_string() ? parseDType(v.get<std::string>()) : std::nullopt;
    if (!d)
      return r.error(path, "expected a dtype name (f32, f16, bf16, i32, i64, bool)");
    return AttrValue(*d);
  }
  }
  return r.error(path, "unknown attribute kind");
}

// The fields every constraint object may have (all but "attrs").
Status parseValueConstraints(const JsonReader &r, const json &c, Constraints &out,
                             const RefResolver &resolve) {
  const std::string &path = out.path;
  if (auto it = c.find("dtype"); it != c.end()) {
    const std::string here = JsonReader::child(path, "dtype");
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, r.stringList(*it, here));
    if (names.empty())
      return r.error(here, "list at least one dtype, or leave the constraint out");
    for (size_t i = 0; i < names.size(); ++i) {
      auto d = parseDType(names[i]);
      if (!d)
        return r.error(JsonReader::index(here, i),
                       "unknown dtype '" + names[i] + "' (f32, f16, bf16, i32, i64, bool)");
      out.dtypes.push_back(*d);
    }
  }
  if (auto it = c.find("rank"); it != c.end()) {
    const std::string here = JsonReader::child(path, "rank");
    KILN_ASSIGN_OR_RETURN(int64_t rank, r.integer(*it, here));
    if (rank < 0)
      return r.error(here, "a rank is 0 or more");
    out.rank = rank;
  }
  if (auto it = c.find("shape"); it != c.end()) {
    const std::string here = JsonReader::child(path, "shape");
    if (!it->is_array())
      return r.error(here, "expected an array of extents (-1 for any)");
    std::vector<int64_t> shape;
    for (size_t i = 0; i < it->size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t d, r.integer((*it)[i], JsonReader::index(here, i)));
      if (d < -1)
        return r.error(JsonReader::index(here, i), "an extent is -1 (any) or 0 or more");
      shape.push_back(d);
    }
    if (out.rank && *out.rank != static_cast<int64_t>(shape.size()))
      return r.error(here, "has " + std::to_string(shape.size()) + " extents but rank is " +
                               std::to_string(*out.rank));
    out.shape = std::move(shape);
  }
  if (auto it = c.find("same_shape_as"); it != c.end()) {
    const std::string here = JsonReader::child(path, "same_shape_as");
    KILN_ASSIGN_OR_RETURN(std::string name, r.asString(*it, here));
    std::optional<PatternRef> ref = resolve(name);
    if (!ref)
      return r.error(here, "'" + name + "' is neither a node id nor a wildcard of the pattern");
    out.same_shape_as = *ref;
  }
  return Status::ok();
}

} // namespace

Expected<Constraints> parseNodeConstraints(const JsonReader &r, const json &c,
                                           const std::string &path, const PatternNode &node,
                                           const ops::OpRegistry &registry,
                                           const RefResolver &resolve) {
  KILN_RETURN_IF_ERROR(r.checkKeys(c, path, {"dtype", "rank", "shape", "attrs", "same_shape_as"}));
  Constraints out;
  out.path = path;
  KILN_RETURN_IF_ERROR(parseValueConstraints(r, c, out, resolve));
  auto attrs = c.find("attrs");
  if (attrs == c.end())
    return out;
  const std::string attrs_path = JsonReader::child(path, "attrs");
  if (!attrs->is_object())
    return r.error(attrs_path, "expected an object of attribute: value");
  if (node.ops.empty())
    return r.error(attrs_path, "attributes need named ops, not \"*\"");
  for (auto it = attrs->begin(); it != attrs->end(); ++it) {
    const std::string here = JsonReader::child(attrs_path, it.key());
    std::optional<AttrKind> kind;
    for (const std::string &op : node.ops) {
      const ops::OpDef &def = registry.find(op)->def;
      const ops::AttrDef *a = def.findAttr(it.key());
      if (!a) {
        std::string known;
        for (const ops::AttrDef &d : def.attrs)
          known += (known.empty() ? "" : ", ") + d.name;
        return r.error(here, op + " has no attribute '" + it.key() + "' (" +
                                 (known.empty() ? "it has none" : "it has " + known) + ")");
      }
      if (kind && *kind != a->kind)
        return r.error(here, "attribute '" + it.key() + "' has different kinds in the listed ops");
      kind = a->kind;
    }
    KILN_ASSIGN_OR_RETURN(AttrValue v, attrValue(r, it.value(), here, *kind));
    out.attrs.emplace_back(it.key(), std::move(v));
  }
  return out;
}

Expected<Constraints> parseWildcardConstraints(const JsonReader &r, const json &c,
                                               const std::string &path,
                                               const RefResolver &resolve) {
  KILN_RETURN_IF_ERROR(r.checkKeys(c, path, {"dtype", "rank", "shape", "same_shape_as"}));
  Constraints out;
  out.path = path;
  KILN_RETURN_IF_ERROR(parseValueConstraints(r, c, out, resolve));
  return out;
}

} // namespace kiln::passes::rules
