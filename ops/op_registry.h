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

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/op_def.h"
#include "support/error.h"

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

// A custom op's definition file (docs/custom-ops.md): its path, for
// messages, and its XML, which a compiled graph carries to be read again.
struct OpSourceFile {
  std::string path;
  std::string xml;
  bool operator==(const OpSourceFile &) const = default;
};

struct RegisteredOp {
  OpDef def;
  OpImpl impl;
  // Custom ops only: the file that defined the op (its gradient ops share
  // their op's), and why the op has no gradient rule where it has none.
  std::shared_ptr<const OpSourceFile> file;
  std::string no_gradient;
};

// An op vocabulary: the built-in ops, or a layer over them holding one job's
// custom ops. A job's registry lives with the job (driver::ResolvedJob) and
// with every graph written in it (Graph::vocabulary); nothing registers ops
// process-wide, so two jobs of one process may define the same custom op
// differently.
class OpRegistry final : public OpVocabulary {
public:
  // The built-in ops: embedded XML definitions joined with the registered
  // implementations. Built on first use and never changed; a definition
  // without implementation (or the reverse) is a build inconsistency
  // reported by consistencyErrors().
  static const OpRegistry &builtin();

  // Empty, or a layer over `base` (which must outlive it: the built-in ops).
  OpRegistry() = default;
  explicit OpRegistry(const OpRegistry *base) : base_(base) {}

  // This layer's op, else the base's.
  const RegisteredOp *find(std::string_view name) const;
  // All names, the base's included, sorted.
  std::vector<std::string> names() const;
  // This layer's ops only: a job's custom ops and their gradient ops.
  std::vector<std::string> ownNames() const;
  // Empty when every definition has an implementation and vice versa.
  const std::vector<std::string> &consistencyErrors() const { return consistency_errors_; }

  // A name this layer or its base has already is an error.
  Status add(RegisteredOp op);
  Status add(OpDef def, OpImpl impl) { return add(RegisteredOp{std::move(def), std::move(impl)}); }

private:
  const OpRegistry *base_ = nullptr;
  std::map<std::string, RegisteredOp, std::less<>> ops_;
  std::vector<std::string> consistency_errors_;
};

// The ops `graph` is written in: its vocabulary, else the built-in ops.
const OpRegistry &opsOf(const Graph &graph);

// Used by KILN_REGISTER_OP; collects implementations during static initialisation.
bool registerOpImpl(const char *name, OpImpl impl);

} // namespace kiln::ops

#define KILN_REGISTER_OP(NAME, ...)                                                                \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_op_registered_, __LINE__) =                  \
      ::kiln::ops::registerOpImpl(NAME, __VA_ARGS__)
