// Small ONNX models built in tests: one graph at a chosen opset, inputs,
// nodes with attributes, imported through the frontend and run on the
// reference interpreter.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/frontend/onnx/onnx_import.h"
#include "ops/interpreter.h"

namespace kiln::testing {

class OnnxTestModel {
public:
  explicit OnnxTestModel(int64_t opset) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
    model_.mutable_graph()->set_name("g");
  }

  void input(const std::string &name, int32_t elem_type, const std::vector<int64_t> &dims) {
    auto *in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  // An int64 initializer (axes, split sizes, shapes).
  void ints(const std::string &name, const std::vector<int64_t> &values) {
    auto *t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
  }
  onnx::NodeProto &node(const std::string &op, const std::vector<std::string> &inputs,
                        const std::vector<std::string> &outputs) {
    auto *n = model_.mutable_graph()->add_node();
    n->set_name(op + "_" + std::to_string(model_.graph().node_size()));
    n->set_op_type(op);
    for (const auto &i : inputs)
      n->add_input(i);
    for (const auto &o : outputs)
      n->add_output(o);
    return *n;
  }
  void output(const std::string &name) { model_.mutable_graph()->add_output()->set_name(name); }

  static void attr(onnx::NodeProto &n, const std::string &name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto &n, const std::string &name, float v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto &n, const std::string &name, const std::string &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(onnx::NodeProto &n, const std::string &name, const std::vector<int64_t> &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

  Expected<frontend::OnnxModel> import() const {
    return frontend::importOnnxModel(model_.SerializeAsString(), "test.onnx", {});
  }
  // Imports and runs on the reference interpreter; the model's weights
  // join `inputs`.
  Expected<ops::TensorMap> run(ops::TensorMap inputs) const {
    KILN_ASSIGN_OR_RETURN(frontend::OnnxModel m, import());
    for (auto &[name, t] : m.weights)
      inputs[name] = t;
    return ops::interpret(m.graph, inputs);
  }

private:
  onnx::ModelProto model_;
};

} // namespace kiln::testing
