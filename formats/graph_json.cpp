#include "formats/graph_json.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/verifier.h"
#include "support/file_io.h"
#include "support/json_reader.h"

namespace kiln {

using nlohmann::json;

namespace {

json floatToJson(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

json attrToJson(const AttrValue &value) {
  json body;
  std::visit(
      [&](const auto &v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          body = floatToJson(v);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          body = json::array();
          for (double d : v)
            body.push_back(floatToJson(d));
        } else if constexpr (std::is_same_v<T, DType>) {
          body = std::string(dtypeName(v));
        } else {
          body = v;
        }
      },
      value);
  return json{{std::string(attrKindName(attrKindOf(value))), body}};
}

json typeToJson(const TensorType &type) {
  return json{{"dtype", std::string(dtypeName(type.dtype))}, {"shape", type.shape}};
}

// The graph format's own field kinds on top of the generic reader.
class Reader : public JsonReader {
public:
  using JsonReader::JsonReader;

  Expected<TensorType> type(const json &obj, const std::string &path) const {
    KILN_ASSIGN_OR_RETURN(std::string dtype_name, string(obj, path, "dtype"));
    auto dtype = parseDType(dtype_name);
    if (!dtype)
      return error(path + ".dtype", "unknown dtype '" + dtype_name + "'");
    KILN_ASSIGN_OR_RETURN(const json *dims, array(obj, path, "shape"));
    TensorType t{*dtype, {}};
    double elements = 1;
    for (size_t i = 0; i < dims->size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t d,
                            integer((*dims)[i], path + ".shape[" + std::to_string(i) + "]"));
      if (d < 0)
        return error(path + ".shape[" + std::to_string(i) + "]", "negative dimension");
      elements *= static_cast<double>(d);
      t.shape.push_back(d);
    }
    if (elements > 9.007199254740992e15)
      return error(path + ".shape", "tensor of " + shapeToString(t.shape) + " is too large");
    return t;
  }

  Expected<AttrValue> attr(const json &v, const std::string &path) const {
    if (!v.is_object() || v.size() != 1)
      return error(path, "expected an object with one kind key, e.g. {\"int\": 3}");
    const std::string kind_name = v.begin().key();
    const json &body = v.begin().value();
    auto kind = parseAttrKind(kind_name);
    if (!kind)
      return error(path, "unknown attribute kind '" + kind_name + "'");
    const std::string body_path = path + "." + kind_name;
    switch (*kind) {
    case AttrKind::Bool:
      if (!body.is_boolean())
        return error(body_path, "expected true or false");
      return AttrValue(body.get<bool>());
    case AttrKind::Int: {
      KILN_ASSIGN_OR_RETURN(int64_t i, integer(body, body_path));
      return AttrValue(i);
    }
    case AttrKind::Float: {
      KILN_ASSIGN_OR_RETURN(double d, number(body, body_path));
      return AttrValue(d);
    }
    case AttrKind::String:
      if (!body.is_string())
        return error(body_path, "expected a string");
      return AttrValue(body.get<std::string>());
    case AttrKind::Ints: {
      if (!body.is_array())
        return error(body_path, "expected an array");
      std::vector<int64_t> out;
      for (size_t i = 0; i < body.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(int64_t x,
                              integer(body[i], body_path + "[" + std::to_string(i) + "]"));
        out.push_back(x);
      }
      return AttrValue(std::move(out));
    }
    case AttrKind::Floats: {
      if (!body.is_array())
        return error(body_path, "expected an array");
      std::vector<double> out;
      for (size_t i = 0; i < body.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(double x, number(body[i], body_path + "[" + std::to_string(i) + "]"));
        out.push_back(x);
      }
      return AttrValue(std::move(out));
    }
    case AttrKind::DType: {
      auto d = body.is_string() ? parseDType(body.get<std::string>()) : std::nullopt;
      if (!d)
        return error(body_path, "expected a dtype name (f32, f16, bf16, i32, i64, bool)");
      return AttrValue(*d);
    }
    }
    return error(path, "unreachable");
  }
};

} // namespace

json graphToJson(const Graph &graph) {
  json j;
  j["format"] = "kiln.graph";
  j["version"] = kGraphJsonVersion;
  j["name"] = graph.name();
  j["inputs"] = json::array();
  for (const GraphInput &in : graph.inputs()) {
    json e = typeToJson(graph.type(in.value));
    e["name"] = in.name;
    e["role"] = std::string(inputRoleName(in.role));
    j["inputs"].push_back(std::move(e));
  }
  if (!graph.groups().empty()) {
    j["groups"] = json::array();
    for (const FusionGroup &g : graph.groups())
      j["groups"].push_back(json{{"name", g.name},
                                 {"kernel", g.kernel},
                                 {"formed_by", g.formed_by},
                                 {"intermediates", intermediatesName(g.intermediates)}});
  }
  j["nodes"] = json::array();
  for (const Node &node : graph.nodes()) {
    json n;
    n["op"] = node.op;
    n["name"] = node.name;
    n["inputs"] = json::array();
    for (ValueId v : node.inputs)
      n["inputs"].push_back(graph.valueName(v));
    n["outputs"] = json::array();
    for (ValueId v : node.outputs)
      n["outputs"].push_back(typeToJson(graph.type(v)));
    n["attrs"] = json::object();
    for (const auto &[key, value] : node.attrs)
      n["attrs"][key] = attrToJson(value);
    if (!node.provenance.pass.empty() || !node.provenance.origins.empty())
      n["provenance"] = json{{"pass", node.provenance.pass}, {"origins", node.provenance.origins}};
    if (node.group != kNoGroup)
      n["group"] = graph.group(node.group).name;
    j["nodes"].push_back(std::move(n));
  }
  j["outputs"] = json::array();
  for (const GraphOutput &out : graph.outputs())
    j["outputs"].push_back(json{{"name", out.name}, {"value", graph.valueName(out.value)}});
  return j;
}

namespace {

// One entry of $.nodes at `path`: the node added to `graph`, its outputs to
// `values`, its group looked up in `groups`.
Status readNode(const Reader &r, const json &n, const std::string &path, Graph &graph,
                std::unordered_map<std::string, ValueId> &values,
                const std::unordered_map<std::string, GroupId> &groups) {
  KILN_ASSIGN_OR_RETURN(std::string op, r.string(n, path, "op"));
  KILN_ASSIGN_OR_RETURN(std::string node_name, r.string(n, path, "name"));
  std::vector<ValueId> in_ids;
  KILN_ASSIGN_OR_RETURN(const json *ins, r.array(n, path, "inputs"));
  for (size_t k = 0; k < ins->size(); ++k) {
    const std::string ipath = path + ".inputs[" + std::to_string(k) + "]";
    if (!(*ins)[k].is_string())
      return r.error(ipath, "expected a value name");
    auto it = values.find((*ins)[k].get<std::string>());
    if (it == values.end())
      return r.error(ipath, "unknown value '" + (*ins)[k].get<std::string>() +
                                "' (values must be defined before use)");
    in_ids.push_back(it->second);
  }
  std::vector<TensorType> out_types;
  KILN_ASSIGN_OR_RETURN(const json *outs, r.array(n, path, "outputs"));
  for (size_t k = 0; k < outs->size(); ++k) {
    KILN_ASSIGN_OR_RETURN(TensorType t,
                          r.type((*outs)[k], path + ".outputs[" + std::to_string(k) + "]"));
    out_types.push_back(std::move(t));
  }
  AttrMap attrs;
  if (auto it = n.find("attrs"); it != n.end()) {
    if (!it->is_object())
      return r.error(path + ".attrs", "expected an object");
    for (auto a = it->begin(); a != it->end(); ++a) {
      KILN_ASSIGN_OR_RETURN(AttrValue v, r.attr(a.value(), path + ".attrs." + a.key()));
      attrs.set(a.key(), std::move(v));
    }
  }
  Provenance prov;
  if (auto it = n.find("provenance"); it != n.end()) {
    KILN_ASSIGN_OR_RETURN(prov.pass, r.string(*it, path + ".provenance", "pass"));
    KILN_ASSIGN_OR_RETURN(const json *origins, r.array(*it, path + ".provenance", "origins"));
    for (const json &o : *origins) {
      if (!o.is_string())
        return r.error(path + ".provenance.origins", "expected strings");
      prov.origins.push_back(o.get<std::string>());
    }
  }
  NodeId id =
      graph.addNode(op, node_name, std::move(in_ids), out_types, std::move(attrs), std::move(prov));
  if (auto it = n.find("group"); it != n.end()) {
    auto g = it->is_string() ? groups.find(it->get<std::string>()) : groups.end();
    if (g == groups.end())
      return r.error(path + ".group", "expected the name of an entry of $.groups");
    graph.node(id).group = g->second;
  }
  for (ValueId out : graph.node(id).outputs) {
    std::string vname = graph.valueName(out);
    if (!values.emplace(vname, out).second)
      return r.error(path + ".name", "duplicate value name '" + vname + "'");
  }
  return Status::ok();
}

} // namespace

Expected<Graph> graphFromJson(const json &j, std::string_view source) {
  Reader r(source);
  KILN_ASSIGN_OR_RETURN(std::string format, r.string(j, "$", "format"));
  if (format != "kiln.graph")
    return r.error("$.format", "expected \"kiln.graph\", got \"" + format + "\"");
  KILN_ASSIGN_OR_RETURN(const json *version, r.member(j, "$", "version"));
  if (!version->is_number_integer() || version->get<int64_t>() != kGraphJsonVersion)
    return r.error("$.version", "unsupported version (this kiln reads version " +
                                    std::to_string(kGraphJsonVersion) + ")");
  KILN_ASSIGN_OR_RETURN(std::string name, r.string(j, "$", "name"));
  Graph graph(name);
  std::unordered_map<std::string, ValueId> values;

  KILN_ASSIGN_OR_RETURN(const json *inputs, r.array(j, "$", "inputs"));
  for (size_t i = 0; i < inputs->size(); ++i) {
    const std::string path = "$.inputs[" + std::to_string(i) + "]";
    const json &e = (*inputs)[i];
    KILN_ASSIGN_OR_RETURN(std::string in_name, r.string(e, path, "name"));
    KILN_ASSIGN_OR_RETURN(TensorType type, r.type(e, path));
    KILN_ASSIGN_OR_RETURN(std::string role_name, r.string(e, path, "role"));
    auto role = parseInputRole(role_name);
    if (!role)
      return r.error(path + ".role",
                     "unknown role '" + role_name + "' (data, param, state, hyper)");
    if (values.count(in_name))
      return r.error(path + ".name", "duplicate value name '" + in_name + "'");
    values[in_name] = graph.addInput(in_name, type, *role);
  }

  std::unordered_map<std::string, GroupId> groups;
  if (auto it = j.find("groups"); it != j.end()) {
    if (!it->is_array())
      return r.error("$.groups", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string path = "$.groups[" + std::to_string(i) + "]";
      FusionGroup g;
      KILN_ASSIGN_OR_RETURN(g.name, r.string((*it)[i], path, "name"));
      KILN_ASSIGN_OR_RETURN(g.kernel, r.string((*it)[i], path, "kernel"));
      KILN_ASSIGN_OR_RETURN(g.formed_by, r.string((*it)[i], path, "formed_by"));
      KILN_ASSIGN_OR_RETURN(std::string inter, r.string((*it)[i], path, "intermediates"));
      auto parsed = parseIntermediates(inter);
      if (!parsed)
        return r.error(path + ".intermediates", "expected \"f32\" or \"storage\"");
      g.intermediates = *parsed;
      if (groups.count(g.name))
        return r.error(path + ".name", "duplicate group name '" + g.name + "'");
      std::string group_name = g.name;
      groups[group_name] = graph.addGroup(std::move(g));
    }
  }

  KILN_ASSIGN_OR_RETURN(const json *nodes, r.array(j, "$", "nodes"));
  for (size_t i = 0; i < nodes->size(); ++i) {
    KILN_RETURN_IF_ERROR(
        readNode(r, (*nodes)[i], "$.nodes[" + std::to_string(i) + "]", graph, values, groups));
  }

  KILN_ASSIGN_OR_RETURN(const json *outputs, r.array(j, "$", "outputs"));
  for (size_t i = 0; i < outputs->size(); ++i) {
    const std::string path = "$.outputs[" + std::to_string(i) + "]";
    KILN_ASSIGN_OR_RETURN(std::string out_name, r.string((*outputs)[i], path, "name"));
    KILN_ASSIGN_OR_RETURN(std::string value_name, r.string((*outputs)[i], path, "value"));
    auto it = values.find(value_name);
    if (it == values.end())
      return r.error(path + ".value", "unknown value '" + value_name + "'");
    graph.addOutput(out_name, it->second);
  }
  if (Status s = verifyStructure(graph); !s)
    return s.error().withContext(std::string(source));
  return graph;
}

Expected<Graph> parseGraphJson(std::string_view text, std::string_view source) {
  KILN_ASSIGN_OR_RETURN(json j, parseJson(text, source));
  return graphFromJson(j, source);
}

} // namespace kiln
