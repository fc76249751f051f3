// The elementwise kernel benchmark's cases (eltwise_kernel_bench.cpp): each
// a small graph of the ops it times, with deterministic data, and the bytes
// its kernels read and write.
#pragma once

#include <cstdint>
#include <string>

#include "ir/float16.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/op_builder.h"
#include "support/error.h"

namespace kiln::bench {

// ---------------------------------------------------------------------------
// Data

// Values in [lo, hi), deterministic per seed.
inline Tensor randomTensor(const TensorType &type, uint64_t seed, float lo = -2.0f,
                           float hi = 2.0f) {
  Tensor t(type);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
    const float v = lo + (hi - lo) * u;
    if (type.dtype == DType::F32)
      t.dataAs<float>()[i] = v;
    else
      t.dataAs<uint16_t>()[i] = floatToHalf(v, OverflowMode::InfNan);
  }
  return t;
}

// ---------------------------------------------------------------------------
// Cases

enum class Op { MulExp, Add, BiasAdd, Fused4, Cast, Softmax, AttnSoftmax, Transpose, Add1d };

inline const char *opName(Op op) {
  switch (op) {
  case Op::MulExp:
    return "mul_exp";
  case Op::Add:
    return "add";
  case Op::BiasAdd:
    return "bias_add";
  case Op::Fused4:
    return "fused4";
  case Op::Cast:
    return "cast";
  case Op::Softmax:
    return "softmax";
  case Op::AttnSoftmax:
    return "attn_softmax";
  case Op::Transpose:
    return "transpose";
  case Op::Add1d:
    return "add_1d";
  }
  return "?";
}

struct CaseKey {
  Op op;
  DType dtype;
  bool big; // 16M, else 1M
  std::string name() const {
    return std::string(opName(op)) + "/" + (dtype == DType::F32 ? "f32" : "f16") + "/" +
           (big ? "16M" : "1M");
  }
  bool operator==(const CaseKey &o) const { return op == o.op && dtype == o.dtype && big == o.big; }
};

constexpr int64_t kHidden = 5120;
inline int64_t tokens(bool big) { return big ? 3276 : 204; }

inline int64_t bytesOf(const Graph &g, ValueId v) {
  return g.type(v).numElements() * static_cast<int64_t>(dtypeSize(g.type(v).dtype));
}

inline void groupAll(Graph &g, const std::string &kind, Intermediates intermediates) {
  GroupId id = g.addGroup(FusionGroup{"fused.bench", kind, "eltwise_kernel_bench", intermediates});
  for (size_t n = 0; n < g.numNodes(); ++n)
    g.node(static_cast<NodeId>(n)).group = id;
}

// Builds the graph of `key`; returns the bytes its kernels read and write.
inline Expected<double> buildGraph(const CaseKey &key, Graph &g) {
  const int64_t t = tokens(key.big);
  const DType dt = key.dtype;
  const TensorType act{dt, {t, kHidden}};
  ops::OpBuilder b(g);
  auto scope = b.scope("bench");
  const double tensor_bytes = static_cast<double>(t * kHidden * dtypeSize(dt));
  double bytes = 0;
  ValueId y = kNoValue;
  switch (key.op) {
  case Op::MulExp: {
    ValueId x = g.addInput("x", act, InputRole::Data);
    ValueId s = g.addInput("s", {dt, {}}, InputRole::Data);
    y = b.create("Exp", "exp", {b.create("Mul", "mul", {x, s})});
    bytes = 4 * tensor_bytes; // Mul reads x, writes t; Exp reads t, writes y
    break;
  }
  case Op::Add: {
    ValueId x = g.addInput("x", act, InputRole::Data);
    ValueId z = g.addInput("y", act, InputRole::Data);
    y = b.create("Add", "add", {x, z});
    bytes = 3 * tensor_bytes;
    break;
  }
  case Op::Add1d: {
    const TensorType flat{dt, {t * kHidden}};
    ValueId x = g.addInput("x", flat, InputRole::Data);
    ValueId z = g.addInput("y", flat, InputRole::Data);
    y = b.create("Add", "add", {x, z});
    bytes = 3 * tensor_bytes;
    break;
  }
  case Op::BiasAdd: {
    ValueId x = g.addInput("x", act, InputRole::Data);
    ValueId bias = g.addInput("bias", {dt, {kHidden}}, InputRole::Parameter);
    y = b.create("Add", "add", {x, bias});
    bytes = 2 * tensor_bytes + static_cast<double>(bytesOf(g, bias));
    break;
  }
  case Op::Fused4: {
    ValueId x = g.addInput("x", act, InputRole::Data);
    ValueId z = g.addInput("y", act, InputRole::Data);
    ValueId bias = g.addInput("bias", {dt, {kHidden}}, InputRole::Parameter);
    ValueId v = b.create("Mul", "mul", {x, z});
    v = b.create("Add", "add", {v, bias});
    v = b.create("Mul", "mul2", {v, x});
    y = b.create("Sub", "sub", {v, z});
    bytes = 3 * tensor_bytes + static_cast<double>(bytesOf(g, bias));
    break;
  }
  case Op::Cast: {
    ValueId x = g.addInput("x", {DType::F32, {t, kHidden}}, InputRole::Data);
    y = b.create("Cast", "cast", {x}, {{"dtype", DType::F16}});
    bytes = static_cast<double>(t * kHidden * (4 + 2));
    break;
  }
  case Op::Softmax: {
    const int64_t rows = key.big ? 8192 : 512;
    ValueId x = g.addInput("x", {dt, {rows, 2048}}, InputRole::Data);
    y = b.create("Softmax", "softmax", {x});
    bytes = 2.0 * static_cast<double>(bytesOf(g, x));
    break;
  }
  case Op::AttnSoftmax: {
    // Attention's scores as SoftmaxFusionPass groups them: / sqrt(d), the
    // causal mask, the row softmax; heads x queries x keys.
    const int64_t heads = key.big ? 32 : 8;
    ValueId x = g.addInput("x", {dt, {heads, 256, 256}}, InputRole::Data);
    ValueId scale = g.addInput("scale", {dt, {}}, InputRole::Data);
    ValueId v = b.create("Div", "scale", {x, scale});
    v = b.create("CausalMask", "mask", {v}, {{"fill", static_cast<double>(lowestFinite(dt))}});
    y = b.create("Softmax", "softmax", {v});
    bytes = 2.0 * static_cast<double>(bytesOf(g, x));
    break;
  }
  case Op::Transpose: {
    ValueId x = g.addInput("x", {dt, {1, t, 40, 128}}, InputRole::Data);
    y = b.create("Transpose", "heads", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    bytes = 2 * tensor_bytes;
    break;
  }
  }
  if (!b.status().isOk())
    return Error(b.status().message());
  g.addOutput("y", y);
  if (key.op == Op::Fused4)
    groupAll(g, "eltwise", Intermediates::Storage);
  if (key.op == Op::AttnSoftmax)
    groupAll(g, "softmax", Intermediates::F32);
  return bytes;
}

} // namespace kiln::bench
