// The op vocabulary: XML definitions plus the C++ implementation of each op
// (shape inference, gradient rule, reference kernel).
//
// Each op's .cpp file registers its implementation with one line:
//   KILN_REGISTER_OP("Softmax", OpImpl{inferSoftmax, gradSoftmax, softmaxKernel});
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/op_def.h"

namespace kiln::ops {

class OpBuilder;

// Output types from input types and (completed) attributes.
using InferFn = std::function<Expected<std::vector<TensorType>>(
    const std::vector<TensorType> &inputs, const AttrMap &attrs)>;

// What a gradient rule sees: the forward node and the gradient of each of its
// outputs (kNoValue where no gradient flows). New nodes go through `builder`,
// whose scope and provenance autodiff has already set.
struct GradContext {
  OpBuilder &builder;
  const Node &node;
  std::vector<ValueId> output_grads;

  ValueId input(size_t i) const { return node.inputs[i]; }
  ValueId output(size_t i) const { return node.outputs[i]; }
  const AttrMap &attrs() const { return node.attrs; }
};
// Returns one gradient per forward input, kNoValue where the op is not
// differentiable in that input (integer indices, masks).
using GradFn = std::function<Expected<std::vector<ValueId>>(GradContext &ctx)>;

struct KernelContext {
  OverflowMode overflow = OverflowMode::InfNan;
  std::string node_name;
};
// Reference kernel: `outputs` arrive allocated (zeroed) with the inferred types.
// Computes in f32 (or wider) and rounds each stored result per ctx.overflow.
using KernelFn =
    std::function<Status(const KernelContext &ctx, const std::vector<const Tensor *> &inputs,
                         std::vector<Tensor> &outputs, const AttrMap &attrs)>;

namespace custom {
struct Program;
}

struct OpImpl {
  InferFn infer;
  GradFn grad; // empty: not differentiable at all
  KernelFn kernel;
  // A custom op's compute (docs/custom-ops.md): what its kernel lowering
  // compiles; built-in ops have lowerings of their own.
  std::shared_ptr<const custom::Program> compute;
};

struct RegisteredOp {
  OpDef def;
  OpImpl impl;
};

class OpRegistry {
public:
  // The built-in ops: embedded XML definitions joined with the registered
  // implementations. Built on first use; a definition without implementation
  // (or the reverse) is a fatal build inconsistency reported by consistency().
  static OpRegistry &global();

  const RegisteredOp *find(std::string_view name) const;
  std::vector<std::string> names() const;
  // Empty when every definition has an implementation and vice versa.
  const std::vector<std::string> &consistencyErrors() const { return consistency_errors_; }

  // Adds ops (custom ops); a name that exists already is an error.
  Status add(OpDef def, OpImpl impl);

private:
  std::map<std::string, RegisteredOp, std::less<>> ops_;
  std::vector<std::string> consistency_errors_;
};

// Used by KILN_REGISTER_OP; collects implementations during static initialisation.
bool registerOpImpl(const char *name, OpImpl impl);

} // namespace kiln::ops

#define KILN_REGISTER_OP(NAME, ...)                                                                \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_op_registered_, __LINE__) =                  \
      ::kiln::ops::registerOpImpl(NAME, __VA_ARGS__)
