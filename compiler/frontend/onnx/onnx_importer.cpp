// Imports an ONNX graph: binds the inputs' shapes, orders the nodes (a cycle
// or an undefined value is an error), converts each node with its op type's
// conversion, folds the nodes whose inputs are all known while importing,
// and names the outputs.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <queue>
#include <set>

#include <spdlog/spdlog.h>

#include "compiler/frontend/onnx/onnx_context.h"
#include "compiler/frontend/onnx/onnx_errors.h"
#include "compiler/frontend/onnx/onnx_import.h"
#include "compiler/frontend/onnx/onnx_reader.h"
#include "compiler/frontend/onnx/onnx_versions.h"
#include "ops/op_registry.h"
#include "ops/op_verifier.h"

namespace kiln::frontend {

using namespace onnx_import;

namespace {

// Nodes whose inputs are all known are folded while importing up to this
// many input elements; larger ones run as kernels.
constexpr int64_t kMaxFoldElements = int64_t{1} << 22;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The bound shape of graph input `in`.
Expected<Shape> inputShape(const onnx::ValueInfoProto &in, const OnnxImportOptions &options,
                           const std::string &source) {
  const std::string &name = in.name();
  if (!in.type().has_tensor_type())
    return Error(source + ": graph input '" + name +
                 "' is not a tensor (sequences, maps and optionals are not supported)")
        .withCode(kErrOnnxUnsupportedType);
  const auto &tt = in.type().tensor_type();
  auto given = options.input_shapes.find(name);
  if (!tt.has_shape()) {
    if (given != options.input_shapes.end())
      return given->second;
    return Error(source + ": graph input '" + name + "' has no shape; give it with --input-shape " +
                 name + ":D0,D1,...")
        .withCode(kErrOnnxUnboundDim);
  }
  const auto &dims = tt.shape().dim();
  if (given != options.input_shapes.end()) {
    if (static_cast<int>(given->second.size()) != dims.size())
      return Error(source + ": --input-shape " + name + " gives " +
                   std::to_string(given->second.size()) + " dimensions; the input has " +
                   std::to_string(dims.size()))
          .withCode(kErrOnnxUnboundDim);
    for (int d = 0; d < dims.size(); ++d)
      if (dims[d].has_dim_value() && dims[d].dim_value() != given->second[d])
        return Error(source + ": --input-shape " + name + " gives dimension " + std::to_string(d) +
                     " as " + std::to_string(given->second[d]) + "; the model fixes it at " +
                     std::to_string(dims[d].dim_value()))
            .withCode(kErrOnnxUnboundDim);
    return given->second;
  }
  Shape shape;
  for (int d = 0; d < dims.size(); ++d) {
    if (dims[d].has_dim_value() && dims[d].dim_value() >= 0) {
      shape.push_back(dims[d].dim_value());
      continue;
    }
    const std::string param = lower(dims[d].dim_param());
    if (options.batch > 0 && param.find("batch") != std::string::npos) {
      shape.push_back(options.batch);
      continue;
    }
    if (options.seq > 0 &&
        (param.find("seq") != std::string::npos || param.find("sequence") != std::string::npos)) {
      shape.push_back(options.seq);
      continue;
    }
    return Error(source + ": graph input '" + name + "' dimension " + std::to_string(d) + " ('" +
                 dims[d].dim_param() + "') is symbolic; bind it with --input-shape " + name +
                 ":D0,D1,...")
        .withCode(kErrOnnxUnboundDim);
  }
  return shape;
}

std::string kilnName(const std::string &onnx_name, const std::string &fallback) {
  std::string n = onnx_name.empty() ? fallback : onnx_name;
  std::replace(n.begin(), n.end(), '/', '.');
  while (!n.empty() && n.front() == '.')
    n.erase(n.begin());
  return n.empty() ? fallback : n;
}

// The nodes in an order where every input is defined before it is read.
Expected<std::vector<int>> nodeOrder(const onnx::GraphProto &g, const std::set<std::string> &known,
                                     const std::string &source) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const std::string &out : g.node(i).output())
      if (!out.empty()) {
        if (known.count(out) || !producer.emplace(out, i).second)
          return Error(source + ": value '" + out + "' is defined twice (node '" +
                       g.node(i).name() + "'); ONNX graphs are in SSA form")
              .withCode(kErrOnnxGraph);
      }
  std::vector<int> missing(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (const std::string &in : g.node(i).input()) {
      if (in.empty() || known.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return Error(source + ": node '" + g.node(i).name() + "' (" + g.node(i).op_type() +
                     ") reads '" + in + "', which no node, input or initializer defines")
            .withCode(kErrOnnxGraph);
      ++missing[i];
      users[it->second].push_back(i);
    }
  std::vector<int> order;
  std::queue<int> ready;
  for (int i = 0; i < n; ++i)
    if (missing[i] == 0)
      ready.push(i);
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop();
    order.push_back(i);
    for (int u : users[i])
      if (--missing[u] == 0)
        ready.push(u);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i)
      if (missing[i] > 0)
        return Error(source + ": the graph has a cycle through node '" + g.node(i).name() + "' (" +
                     g.node(i).op_type() + "); ONNX graphs must be acyclic")
            .withCode(kErrOnnxGraph);
  }
  return order;
}

// "node 'name' (OpType)", for errors the importer prefixes with the file.
std::string nodeName(const onnx::NodeProto &node) {
  return "node '" + node.name() + "' (" + node.op_type() + ")";
}

// Runs `convert` on a scratch graph holding only `node`'s constant inputs
// and returns its outputs' values: folding by the reference kernels.
Expected<std::vector<std::optional<Tensor>>>
foldNode(const ConvertFn &convert, const onnx::NodeProto &node, int64_t opset, int version,
         const std::unordered_map<std::string, OnnxValue> &env,
         std::shared_ptr<const ops::OpRegistry> registry) {
  Graph scratch("fold");
  scratch.setVocabulary(registry);
  ops::OpBuilder b(scratch);
  std::unordered_map<std::string, OnnxValue> local;
  for (const std::string &in : node.input())
    if (!in.empty())
      local[in] = OnnxValue{kNoValue, env.at(in).constant, false};
  ops::TensorMap weights;
  Converter c(b, local, weights, node, opset, version, "fold");
  KILN_RETURN_IF_ERROR(convert(c));
  KILN_RETURN_IF_ERROR(b.status());
  std::vector<std::optional<Tensor>> out(node.output_size());
  bool run = false;
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty())
      continue;
    auto it = local.find(node.output(k));
    if (it == local.end())
      continue;
    if (it->second.constant)
      out[k] = it->second.constant;
    else if (it->second.value != kNoValue) {
      scratch.addOutput("out" + std::to_string(k), it->second.value);
      run = true;
    }
  }
  if (run) {
    KILN_ASSIGN_OR_RETURN(ops::TensorMap values, ops::interpret(scratch, weights));
    for (int k = 0; k < node.output_size(); ++k)
      if (auto it = values.find("out" + std::to_string(k)); it != values.end())
        out[k] = it->second;
  }
  return out;
}

// Ops that must not fold even with constant inputs (their value is not
// a function of the inputs).
bool foldable(const std::string &op) {
  return op != "RandomNormal" && op != "RandomUniform" && op != "RandomNormalLike" &&
         op != "RandomUniformLike" && op != "Multinomial" && op != "Bernoulli";
}

bool unsupportedFamily(const std::string &op, std::string &why) {
  static const std::set<std::string> conv = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv",
                                             "DeformConv"};
  static const std::set<std::string> pool = {"MaxPool",           "AveragePool", "GlobalMaxPool",
                                             "GlobalAveragePool", "LpPool",      "GlobalLpPool",
                                             "MaxRoiPool",        "RoiAlign",    "MaxUnpool"};
  static const std::set<std::string> control = {"If", "Loop", "Scan"};
  if (conv.count(op))
    why = "convolutions are not supported (kiln compiles transformer graphs)";
  else if (pool.count(op))
    why = "pooling is not supported (kiln compiles transformer graphs)";
  else if (control.count(op))
    why = "control flow (If, Loop, Scan) is not supported: kiln compiles static graphs";
  else if (op.rfind("Sequence", 0) == 0 || op == "SplitToSequence" || op == "ConcatFromSequence" ||
           op.rfind("Optional", 0) == 0)
    why = "sequences and optionals are not supported: kiln compiles tensors only";
  else
    return false;
  return true;
}

// The model's opset of the default domain, within kMinOpset..kMaxOpset.
Expected<int64_t> defaultOpset(const onnx::ModelProto &model, const std::string &source) {
  int64_t opset = -1;
  std::string others;
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
    else
      others += (others.empty() ? "" : ", ") + imp.domain();
  }
  if (opset < 0 && model.opset_import_size() == 0)
    opset = 1; // IR version 1 models carry no opset_import
  if (opset < 0)
    return Error(source + ": the model imports no opset of the default ONNX domain (only " +
                 others + "); kiln reads the default domain's opsets " + std::to_string(kMinOpset) +
                 " to " + std::to_string(kMaxOpset))
        .withCode(kErrOnnxOpset);
  if (opset < kMinOpset || opset > kMaxOpset)
    return Error(source + ": the model imports opset " + std::to_string(opset) +
                 " of the default ONNX domain; kiln reads opsets " + std::to_string(kMinOpset) +
                 " to " + std::to_string(kMaxOpset) +
                 " (re-export with torch.onnx.export(..., opset_version=17))")
        .withCode(kErrOnnxOpset);
  return opset;
}

// The version of `node`'s operator that `opset` selects, when kiln reads
// it; else the coded refusal (another domain, an unsupported operator, a
// version kiln lacks).
Expected<int> nodeVersion(const onnx::NodeProto &node, int64_t opset, const std::string &source) {
  const std::string &op = node.op_type();
  const std::string where = source + ": node '" + node.name() + "' (" + op;
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return Error(where + ", domain '" + node.domain() +
                 "'): operators outside the default ONNX domain are not supported")
        .withCode(kErrOnnxOpset);
  const std::string at = where + ", opset " + std::to_string(opset) + "): ";
  std::string why;
  if (unsupportedFamily(op, why))
    return Error(at + why).withCode(kErrOnnxUnsupportedOp);
  for (const auto &a : node.attribute())
    if (a.has_g() || a.graphs_size() > 0)
      return Error(at + "attribute '" + a.name() +
                   "' holds a subgraph; control flow is not supported")
          .withCode(kErrOnnxUnsupportedOp);
  const OpVersions *versions = findOpVersions(op);
  if (!findConverter(op) || !versions)
    return Error(at + "operator " + op +
                 " is not supported; docs/onnx.md lists the operators kiln reads")
        .withCode(kErrOnnxUnsupportedOp);
  const int version = resolveVersion(*versions, opset);
  if (kilnReads(*versions, version))
    return version;
  const std::string reads = "; kiln reads " + op + " version" +
                            (versions->kiln.size() > 1 ? "s " : " ") + versionList(versions->kiln);
  if (version == 0)
    return Error(at + "ONNX defines " + op + " from opset " +
                 std::to_string(versions->onnx.front()) + ", after the model's opset" + reads)
        .withCode(kErrOnnxOpset);
  return Error(at + "opset " + std::to_string(opset) + " selects " + op + "-" +
               std::to_string(version) + ", which kiln does not read" + reads)
      .withCode(kErrOnnxOpset);
}

// Converts `node` (the graph's node `index`) into `b`'s graph, or folds it
// when its inputs are all known while importing.
Status importNode(const onnx::NodeProto &node, int index, int64_t opset,
                  std::unordered_map<std::string, OnnxValue> &env, ops::TensorMap &weights,
                  ops::OpBuilder &b, const OnnxImportOptions &options, const std::string &source) {
  const std::string where = source + ": node '" + node.name() + "' (" + node.op_type() + ")";
  KILN_ASSIGN_OR_RETURN(const int version, nodeVersion(node, opset, source));
  const ConvertFn *convert = findConverter(node.op_type());
  bool all_constant = node.input_size() > 0 && foldable(node.op_type());
  int64_t elements = 0;
  for (const std::string &in : node.input()) {
    if (in.empty())
      continue;
    const OnnxValue &v = env.at(in);
    if (!v.constant || (v.initializer && isFloat(v.constant->dtype())))
      all_constant = false;
    else
      elements += v.constant->numElements();
  }
  const std::string name = kilnName(node.name(), node.op_type() + "_" + std::to_string(index));
  if (all_constant && elements <= kMaxFoldElements) {
    Expected<std::vector<std::optional<Tensor>>> folded = Error("");
    try {
      folded = foldNode(*convert, node, opset, version, env, options.ops);
    } catch (const MissingInput &e) {
      folded = Error(nodeName(node) + ": " + e.what()).withCode(kErrOnnxMalformed);
    }
    if (!folded) {
      const Error &e = folded.error();
      return (e.code().empty() ? e.withCode(kErrOnnxUnsupportedAttr) : e).withContext(source);
    }
    for (int k = 0; k < node.output_size(); ++k)
      if (!node.output(k).empty() && (*folded)[k])
        env[node.output(k)] = OnnxValue{kNoValue, std::move(*(*folded)[k]), false};
    return Status::ok();
  }
  Converter c(b, env, weights, node, opset, version, name);
  Status converted = Status::ok();
  try {
    converted = (*convert)(c);
  } catch (const MissingInput &e) {
    converted = Error(nodeName(node) + ": " + e.what()).withCode(kErrOnnxMalformed);
  }
  if (!converted) {
    const Error &e = converted.error();
    return (e.code().empty() ? e.withCode(kErrOnnxUnsupportedAttr) : e).withContext(source);
  }
  if (!b.status())
    return Error(where + ": " + b.status().message()).withCode(kErrOnnxUnsupportedAttr);
  for (const std::string &o : node.output())
    if (!o.empty() && !env.count(o))
      return Error(where + ": output '" + o + "' is not supported by kiln's conversion")
          .withCode(kErrOnnxUnsupportedAttr);
  return Status::ok();
}

Expected<OnnxModel> importGraph(const onnx::ModelProto &model, const std::string &source,
                                const std::string &model_dir, const OnnxImportOptions &options) {
  KILN_ASSIGN_OR_RETURN(const int64_t opset, defaultOpset(model, source));

  const onnx::GraphProto &g = model.graph();
  OnnxModel out{Graph(kilnName(g.name(), "onnx")), {}};
  out.graph.setVocabulary(options.ops);
  ops::OpBuilder b(out.graph);
  b.setProvenance(Provenance{"frontend", {}});
  std::unordered_map<std::string, OnnxValue> env;

  std::set<std::string> initializer_names, known;
  for (const auto &init : g.initializer()) {
    const std::string what = source + ": initializer '" + init.name() + "'";
    KILN_ASSIGN_OR_RETURN(Tensor t, tensorFromOnnx(init, model_dir, what));
    if (!initializer_names.insert(init.name()).second)
      return Error(what + " is defined twice").withCode(kErrOnnxGraph);
    env[init.name()] = OnnxValue{kNoValue, std::move(t), true};
    known.insert(init.name());
  }
  if (g.sparse_initializer_size() > 0)
    return Error(source + ": sparse initializers are not supported")
        .withCode(kErrOnnxUnsupportedType);
  for (const auto &in : g.input()) {
    if (initializer_names.count(in.name()))
      continue; // an input with a default: the initializer is its weight
    KILN_ASSIGN_OR_RETURN(Shape shape, inputShape(in, options, source));
    auto dtype = dtypeOfOnnx(in.type().tensor_type().elem_type());
    if (!dtype)
      return dtype.error().withContext(source + ": graph input '" + in.name() + "'");
    ValueId v = out.graph.addInput(in.name(), TensorType{*dtype, shape}, InputRole::Data);
    env[in.name()] = OnnxValue{v, std::nullopt, false};
    known.insert(in.name());
  }
  for (const auto &[name, shape] : options.input_shapes)
    if (!known.count(name) || initializer_names.count(name))
      return Error(source + ": --input-shape names '" + name +
                   "', which is not an input of the "
                   "model")
          .withCode(kErrOnnxUnboundDim);

  KILN_ASSIGN_OR_RETURN(std::vector<int> order, nodeOrder(g, known, source));
  for (int index : order)
    KILN_RETURN_IF_ERROR(
        importNode(g.node(index), index, opset, env, out.weights, b, options, source));

  for (const auto &o : g.output()) {
    auto it = env.find(o.name());
    if (it == env.end())
      return Error(source + ": graph output '" + o.name() + "' is not computed by any node")
          .withCode(kErrOnnxGraph);
    OnnxValue &v = it->second;
    ValueId id = materialize(b, kilnName(o.name(), "output"), v, out.weights);
    if (!b.status())
      return b.status().error().withContext(source);
    // An input or another output handed straight out gets a node of its own.
    bool taken = out.graph.value(id).producer == kNoNode;
    for (const GraphOutput &prev : out.graph.outputs())
      taken = taken || prev.value == id;
    if (taken)
      id = b.create("Reshape", kilnName(o.name(), "output") + ".copy", {id},
                    {{"shape", out.graph.type(id).shape}});
    out.graph.addOutput(o.name(), id);
  }
  if (!b.status())
    return b.status().error().withContext(source);
  Status verified = ops::verifyGraph(out.graph);
  if (!verified)
    return verified.error().withContext(source);
  return out;
}

} // namespace

bool isOnnxPath(const std::string &path) { return path.ends_with(".onnx"); }

Expected<std::pair<std::string, Shape>> parseInputShape(const std::string &text) {
  const size_t colon = text.rfind(':');
  const Error bad("--input-shape: expected NAME:D0,D1,... (an input's name and its dimensions), "
                  "got '" +
                  text + "'");
  if (colon == std::string::npos || colon == 0)
    return bad;
  Shape shape;
  const std::string dims = text.substr(colon + 1);
  size_t at = 0;
  while (at < dims.size()) {
    size_t end = dims.find(',', at);
    if (end == std::string::npos)
      end = dims.size();
    const std::string d = dims.substr(at, end - at);
    if (d.empty() || d.size() > 12 || d.find_first_not_of("0123456789") != std::string::npos)
      return bad;
    shape.push_back(std::stoll(d));
    at = end + 1;
  }
  if (!dims.empty() && dims.back() == ',')
    return bad;
  return std::make_pair(text.substr(0, colon), shape);
}

Expected<OnnxModel> loadOnnxModel(const std::string &path, const OnnxImportOptions &options) {
  KILN_ASSIGN_OR_RETURN(auto model, readOnnxModel(path));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return importGraph(*model, path, dir, options);
}

Expected<OnnxModel> importOnnxModel(const std::string &bytes, const std::string &source,
                                    const OnnxImportOptions &options) {
  KILN_ASSIGN_OR_RETURN(auto model, parseOnnxModel(bytes, source));
  const std::string dir = std::filesystem::path(source).parent_path().string();
  return importGraph(*model, source, dir, options);
}

} // namespace kiln::frontend
