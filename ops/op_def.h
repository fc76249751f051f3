// An op's signature as read from its XML definition (ops/defs/*.xml).
//
//   <op name="Softmax" kind="reduce">
//     <summary>Softmax along one axis.</summary>
//     <input name="x" dtypes="f32,f16,bf16"/>
//     <output name="y"/>
//     <attr name="axis" type="int" default="-1"/>
//   </op>
//
// <input> may carry optional="true" (only trailing inputs) or variadic="true"
// (the last input, one or more values); <output> may be variadic too (its
// count then comes from shape inference). Attributes without a default are
// required. <compute> and <gradient> belong to custom ops and are read by
// ops/custom/custom_op_file.h; parseOpDefs skips them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"
#include "ir/shape.h"
#include "support/error.h"

namespace kiln::ops {

// TVM's ordered pattern kinds: fusion legality checks are comparisons.
enum class OpKind {
  Elementwise,        // one input element -> one output element, same shape
  Broadcast,          // elementwise after broadcasting inputs
  Injective,          // each output element reads one input element (reshape, transpose, slice)
  Reduce,             // reduces along axes (sum, softmax, norms)
  OutElemwiseFusable, // matmul-like: an elementwise epilogue may fuse into it
  Opaque,             // everything else
  Collective,         // exchanges data within a device group; runs between kernels, never fused
};

std::string_view opKindName(OpKind kind);
std::optional<OpKind> parseOpKind(std::string_view name);

struct OperandDef {
  std::string name;
  std::vector<DType> dtypes; // empty: any dtype
  bool optional = false;
  bool variadic = false;
};

struct AttrDef {
  std::string name;
  AttrKind kind = AttrKind::Int;
  std::optional<AttrValue> default_value; // none: the attribute is required
  std::string doc;
};

struct OpDef {
  std::string name;
  OpKind kind = OpKind::Opaque;
  std::string summary;
  std::vector<OperandDef> inputs;
  std::vector<OperandDef> outputs;
  std::vector<AttrDef> attrs;
  std::string source; // "ops/defs/elementwise.xml:12" or a custom-op file
  // A custom op's compute in its canonical text (docs/custom-ops.md); empty
  // for built-in ops. Part of a kernel's cache key: it decides the code.
  std::string compute;

  const AttrDef *findAttr(std::string_view attr_name) const;
  // Bounds on the number of inputs given optional and variadic operands.
  size_t minInputs() const;
  std::optional<size_t> maxInputs() const; // none: unbounded
};

// Parses every <op> of an XML document; `source` names it in errors, which
// carry the line of the offending element.
Expected<std::vector<OpDef>> parseOpDefs(std::string_view xml, std::string_view source);

// Checks input count and dtypes against the definition.
Status checkInputs(const OpDef &def, const std::vector<TensorType> &inputs, std::string_view where);

// Checks attributes against the definition (unknown, missing, ill-typed) and
// returns them with defaults filled in.
Expected<AttrMap> completeAttrs(const OpDef &def, const AttrMap &attrs, std::string_view where);

} // namespace kiln::ops
