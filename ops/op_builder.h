// Builds nodes through the op registry: infers output types, fills default
// attributes, scopes and uniquifies names, stamps provenance.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "ops/op_registry.h"

namespace kiln::ops {

class OpBuilder {
public:
  // Nodes are built from the ops of the graph's vocabulary (opsOf).
  explicit OpBuilder(Graph &graph);

  Graph &graph() { return graph_; }
  const TensorType &type(ValueId v) const { return graph_.type(v); }
  const Shape &shape(ValueId v) const { return graph_.type(v).shape; }
  DType dtype(ValueId v) const { return graph_.type(v).dtype; }

  // Appends `op` named "<scope>.<name>" (with a "_N" suffix when taken).
  Expected<std::vector<ValueId>> tryCreate(std::string_view op, std::string_view name,
                                           std::vector<ValueId> inputs, const AttrMap &attrs = {});

  // Sticky-error forms for builders of large graphs: the first failure is kept
  // in status(), later calls with invalid inputs return kNoValue quietly.
  ValueId create(std::string_view op, std::string_view name, std::vector<ValueId> inputs,
                 const AttrMap &attrs = {});
  std::vector<ValueId> createMulti(std::string_view op, std::string_view name,
                                   std::vector<ValueId> inputs, const AttrMap &attrs = {});
  // A Fill node: `value` broadcast to `shape` (a scalar by default).
  ValueId constant(double value, DType dtype, std::string_view name, Shape shape = {});
  const Status &status() const { return status_; }
  void fail(Error error);

  // Scope stack: names are "<scope>.<scope>.<name>".
  class ScopeGuard {
  public:
    explicit ScopeGuard(OpBuilder &b) : b_(&b) {}
    ScopeGuard(ScopeGuard &&other) noexcept : b_(other.b_) { other.b_ = nullptr; }
    ScopeGuard(const ScopeGuard &) = delete;
    ScopeGuard &operator=(const ScopeGuard &) = delete;
    ~ScopeGuard() {
      if (b_)
        b_->scopes_.pop_back();
    }

  private:
    OpBuilder *b_;
  };
  [[nodiscard]] ScopeGuard scope(std::string_view name);
  std::string scopedName(std::string_view name) const;

  // Stamped on every node created from now on.
  void setProvenance(Provenance provenance) { provenance_ = std::move(provenance); }

private:
  std::string uniqueName(std::string name);

  Graph &graph_;
  const OpRegistry &registry_;
  std::vector<std::string> scopes_;
  std::unordered_set<std::string> names_;
  Provenance provenance_;
  Status status_;
};

} // namespace kiln::ops
