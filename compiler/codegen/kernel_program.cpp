#include "compiler/codegen/kernel_program.h"

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace kiln::codegen {
namespace {

int64_t product(const Shape &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= shape[d];
  return n;
}

// For each Var of the body being walked: the kernel row axis it equals, if any.
using RowAxes = std::vector<std::optional<int>>;

// Walks every body reachable from the stored and materialised stages, as the
// emitter would evaluate it, checking that reads of materialised stages stay
// in the row of the element being computed.
class RowChecker {
public:
  RowChecker(const KernelProgram &program, int outer_rank)
      : program_(program), outer_rank_(outer_rank) {}

  bool ok() {
    for (size_t s = 0; s < program_.stages.size(); ++s) {
      const Stage &stage = program_.stages[s];
      if (!stage.materialized && !isStored(static_cast<int>(s)))
        continue;
      RowAxes axes(stage.shape.size());
      for (int d = 0; d < outer_rank_; ++d)
        axes[d] = d;
      if (!walk(stage.body, axes))
        return false;
    }
    return true;
  }

private:
  bool isStored(int stage) const {
    for (const StoredOutput &o : program_.outputs)
      if (o.rowStage() == stage)
        return true;
    return false;
  }

  std::optional<int> rowAxisOf(const ExprRef &index, const RowAxes &axes) const {
    if (index->kind == ExprKind::Var && index->var < static_cast<int>(axes.size()))
      return axes[index->var];
    return std::nullopt;
  }

  bool walk(const ExprRef &e, const RowAxes &axes) {
    if (!visited_.insert({e.get(), axes}).second)
      return true;
    for (const ExprRef &op : e->operands)
      if (!walk(op, axes))
        return false;
    if (e->kind != ExprKind::Load)
      return true;
    const bool row_local_input = e->buffer == program_.accumulator;
    if (program_.isInput(e->buffer) && !row_local_input)
      return true;
    if (row_local_input || program_.stageOf(e->buffer).materialized) {
      for (int d = 0; d < outer_rank_; ++d)
        if (rowAxisOf(e->operands[d], axes) != d)
          return false;
      return true;
    }
    const Stage &target = program_.stageOf(e->buffer);
    RowAxes inner(target.shape.size());
    for (size_t d = 0; d < inner.size(); ++d)
      inner[d] = rowAxisOf(e->operands[d], axes);
    return walk(target.body, inner);
  }

  const KernelProgram &program_;
  int outer_rank_;
  std::set<std::pair<const Expr *, RowAxes>> visited_;
};

// Errors for loads of later stages and index counts that do not match.
Status checkLoads(const KernelProgram &program, const ExprRef &e, int stage,
                  std::set<const Expr *> &seen) {
  if (!seen.insert(e.get()).second)
    return Status::ok();
  for (const ExprRef &op : e->operands)
    KILN_RETURN_IF_ERROR(checkLoads(program, op, stage, seen));
  if (e->kind != ExprKind::Load)
    return Status::ok();
  const int buffers = static_cast<int>(program.inputs.size() + program.stages.size());
  if (e->buffer < 0 || e->buffer >= buffers)
    return Error("stage " + std::to_string(stage) + " reads buffer " + std::to_string(e->buffer) +
                 ", which does not exist");
  size_t rank;
  if (program.isInput(e->buffer)) {
    rank = program.inputs[e->buffer].shape.size();
  } else {
    if (e->buffer >= program.stageBuffer(stage))
      return Error("stage " + std::to_string(stage) + " reads stage " +
                   std::to_string(e->buffer - program.inputs.size()) +
                   ", which is not computed before it");
    rank = program.stageOf(e->buffer).shape.size();
  }
  if (e->operands.size() != rank)
    return Error("stage " + std::to_string(stage) + " reads buffer " + std::to_string(e->buffer) +
                 " of rank " + std::to_string(rank) + " with " +
                 std::to_string(e->operands.size()) + " indices");
  return Status::ok();
}

void collectReads(const ExprRef &e, std::set<int> &reads, std::set<const Expr *> &seen) {
  if (!seen.insert(e.get()).second)
    return;
  if (e->kind == ExprKind::Load)
    reads.insert(e->buffer);
  for (const ExprRef &op : e->operands)
    collectReads(op, reads, seen);
}

// The largest outer_rank (at most `cap`) for which the stored (row) stages,
// the materialised stages and the accumulator share the row axes and every
// read of a materialised stage stays in its row.
int chooseOuterRank(const KernelProgram &program, size_t cap) {
  std::vector<const Shape *> shapes;
  for (const StoredOutput &o : program.outputs)
    shapes.push_back(&program.stages[o.rowStage()].shape);
  for (const Stage &s : program.stages)
    if (s.materialized)
      shapes.push_back(&s.shape);
  if (program.accumulator >= 0)
    shapes.push_back(&program.inputs[program.accumulator].shape);
  size_t prefix = std::min(cap, shapes[0]->size());
  for (const Shape *shape : shapes) {
    size_t d = 0;
    while (d < prefix && d < shape->size() && (*shape)[d] == (*shapes[0])[d])
      ++d;
    prefix = d;
  }
  // A stored stage keeps at least one axis of its own when it has any, so a
  // row is a run of contiguous elements and not a single scattered element
  // (a row sum's row is the output's element, however many it has).
  for (const StoredOutput &o : program.outputs) {
    if (o.row_sum_stage >= 0)
      continue;
    const Shape &shape = program.stages[o.stage].shape;
    if (!shape.empty() && prefix >= shape.size())
      prefix = shape.size() - 1;
  }
  int outer = static_cast<int>(prefix);
  while (outer > 0 && !RowChecker(program, outer).ok())
    --outer;
  return outer;
}

constexpr size_t kMaxRowSumPad = 2; // leading unit axes a row sum may take

// The leading nest of f32 Sum reductions of an output's body (under a Round
// to the output's own dtype, which its store repeats), outermost first.
struct SumNest {
  std::vector<std::pair<int, int64_t>> levels; // rvar id, extent
  ExprRef summand;                             // the body inside the nest
};

std::optional<SumNest> sumNest(ExprRef body, DType dtype) {
  if (body->kind == ExprKind::Round && body->dtype == dtype)
    body = body->operands[0];
  SumNest nest;
  while (body->kind == ExprKind::Reduce && body->reduce == ReduceOp::Sum &&
         body->type == ScalarType::F32 && body->extent > 0) {
    nest.levels.emplace_back(body->var, body->extent);
    body = body->operands[0];
  }
  if (nest.levels.empty())
    return std::nullopt;
  nest.summand = body;
  return nest;
}

// The row sum's summand: after `pad` leading unit axes, the nest's first p
// levels become axes [pad, pad + p), the output's axis j becomes axis
// pad + p + j, and the levels from p on stay sums.
ExprRef rowSumBody(const SumNest &nest, size_t p, size_t pad) {
  std::map<int, int> axis_of;
  for (size_t d = 0; d < p; ++d)
    axis_of[nest.levels[d].first] = static_cast<int>(pad + d);
  std::map<const Expr *, ExprRef> memo;
  std::function<ExprRef(const ExprRef &)> rewrite = [&](const ExprRef &e) -> ExprRef {
    if (auto it = memo.find(e.get()); it != memo.end())
      return it->second;
    ExprRef r = e;
    if (e->kind == ExprKind::Var) {
      r = var(e->var + static_cast<int>(pad + p));
    } else if (e->kind == ExprKind::RVar && axis_of.count(e->var)) {
      r = var(axis_of.at(e->var));
    } else if (!e->operands.empty()) {
      auto copy = std::make_shared<Expr>(*e);
      for (ExprRef &op : copy->operands)
        op = rewrite(op);
      r = std::move(copy);
    }
    memo[e.get()] = r;
    return r;
  };
  ExprRef body = rewrite(nest.summand);
  for (size_t d = nest.levels.size(); d-- > p;)
    body = reduce(ReduceOp::Sum, nest.levels[d].first, nest.levels[d].second, body);
  return body;
}

// Makes every output that is a sum (and that no other stage reads) a row sum
// over the nest's first p levels, for the largest p that makes them the
// kernel's rows. Leaves the program as it is when none does.
void planRowSums(KernelProgram &program) {
  std::vector<std::pair<size_t, SumNest>> nests;
  size_t levels = SIZE_MAX;
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    const Stage &stage = program.stages[program.outputs[o].stage];
    if (stage.materialized)
      continue;
    if (std::optional<SumNest> nest = sumNest(stage.body, program.outputs[o].dtype)) {
      levels = std::min(levels, nest->levels.size());
      nests.emplace_back(o, std::move(*nest));
    }
  }
  // A reduced axis of extent 1 has no level (the lowering reads it at 0), so
  // the rows may need leading unit axes to line up with the kernel's other
  // outputs: a batch of one's [1, S, H] beside a sum over S.
  for (size_t p = nests.empty() ? 0 : levels; p >= 1; --p)
    for (size_t pad = 0; pad <= kMaxRowSumPad; ++pad) {
      KernelProgram trial = program;
      for (const auto &[o, nest] : nests) {
        const Stage &stage = program.stages[program.outputs[o].stage];
        Shape shape(pad, 1);
        for (size_t d = 0; d < p; ++d)
          shape.push_back(nest.levels[d].second);
        shape.insert(shape.end(), stage.shape.begin(), stage.shape.end());
        trial.stages.push_back(
            Stage{stage.name + ".rows", shape, ScalarType::F32, rowSumBody(nest, p, pad), false});
        trial.outputs[o].row_sum_stage = static_cast<int>(trial.stages.size()) - 1;
      }
      trial.outer_rank = chooseOuterRank(trial, p + pad);
      if (trial.outer_rank == static_cast<int>(p + pad) && trial.rows() > 1) {
        program = std::move(trial);
        return;
      }
    }
}

} // namespace

int64_t KernelProgram::rows() const {
  if (outputs.empty())
    return 0;
  return product(stages[outputs[0].rowStage()].shape, 0, outer_rank);
}

bool KernelProgram::hasRowSums() const {
  for (const StoredOutput &o : outputs)
    if (o.row_sum_stage >= 0)
      return true;
  return false;
}

bool KernelProgram::storesAccumulatorAsIs() const {
  if (accumulator < 0 || !library.empty() || stages.size() != 1 || outputs.size() != 1 ||
      outputs[0].dtype != DType::F32 || outputs[0].row_sum_stage >= 0)
    return false;
  const Stage &stage = stages[outputs[0].stage];
  ExprRef body = stage.body;
  if (body->kind == ExprKind::Round && body->dtype == DType::F32)
    body = body->operands[0];
  if (stage.materialized || stage.shape != inputs[accumulator].shape ||
      body->kind != ExprKind::Load || body->buffer != accumulator ||
      body->operands.size() != stage.shape.size())
    return false;
  for (size_t d = 0; d < body->operands.size(); ++d)
    if (body->operands[d]->kind != ExprKind::Var || body->operands[d]->var != static_cast<int>(d))
      return false;
  return true;
}

bool KernelProgram::accumulatorIsRowLocal() const {
  return accumulator >= 0 && outer_rank + 1 == static_cast<int>(inputs[accumulator].shape.size());
}

int64_t KernelProgram::scratchElementsPerRow() const {
  int64_t n = 0;
  for (const Stage &s : stages)
    if (s.materialized)
      n += product(s.shape, outer_rank, s.shape.size());
  return n;
}

int64_t KernelProgram::scratchOffset(int stage) const {
  int64_t n = 0;
  for (int s = 0; s < stage; ++s)
    if (stages[s].materialized)
      n += product(stages[s].shape, outer_rank, stages[s].shape.size());
  return n;
}

Status planRows(KernelProgram &program) {
  if (program.outputs.empty())
    return Error("the kernel stores nothing");
  std::set<int> read;
  for (size_t s = 0; s < program.stages.size(); ++s) {
    std::set<const Expr *> seen;
    KILN_RETURN_IF_ERROR(checkLoads(program, program.stages[s].body, static_cast<int>(s), seen));
    std::set<const Expr *> seen_reads;
    collectReads(program.stages[s].body, read, seen_reads);
  }
  for (const StoredOutput &o : program.outputs)
    if (o.stage < 0 || o.stage >= static_cast<int>(program.stages.size()))
      return Error("an output names stage " + std::to_string(o.stage) + ", which does not exist");

  // A reduction read by another stage is computed once per row into scratch.
  for (size_t s = 0; s < program.stages.size(); ++s) {
    Stage &stage = program.stages[s];
    stage.materialized = stage.held || (containsReduce(stage.body) &&
                                        read.count(program.stageBuffer(static_cast<int>(s))));
  }

  program.outer_rank = chooseOuterRank(program, SIZE_MAX);
  // A kernel of one row runs on one thread: its sums over what would be
  // rows are split by rows instead (a library routine has its own rows).
  if (program.rows() == 1 && program.library.empty() && program.accumulator < 0)
    planRowSums(program);
  return Status::ok();
}

std::string programToString(const KernelProgram &program) {
  std::ostringstream os;
  for (size_t i = 0; i < program.inputs.size(); ++i)
    os << "b" << i << " = input " << typeToString(program.inputs[i]) << "\n";
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const Stage &st = program.stages[s];
    os << "b" << program.stageBuffer(static_cast<int>(s)) << " = stage " << st.name << " "
       << scalarTypeName(st.type) << shapeToString(st.shape)
       << (st.materialized ? " materialized" : "") << " = " << exprToString(st.body) << "\n";
  }
  for (const StoredOutput &o : program.outputs)
    os << "store b" << program.stageBuffer(o.stage) << " as " << dtypeName(o.dtype)
       << (o.row_sum_stage >= 0
               ? ", summed over rows from b" + std::to_string(program.stageBuffer(o.row_sum_stage))
               : std::string())
       << "\n";
  if (!program.library.empty()) {
    os << "calls " << program.library << "(";
    for (size_t i = 0; i < program.library_args.size(); ++i)
      os << (i ? ", " : "") << program.library_args[i];
    os << ")\n";
  }
  os << "rows over " << program.outer_rank << " axes\n";
  return os.str();
}

std::vector<AxisRange> innerRanges(const KernelProgram &program, const Shape &shape) {
  if (static_cast<size_t>(program.outer_rank) >= shape.size())
    return {};
  std::vector<AxisBody> bodies;
  for (const Stage &stage : program.stages)
    if (!stage.shape.empty())
      bodies.push_back({stage.body, static_cast<int>(stage.shape.size()) - 1, stage.shape.back()});
  std::vector<AxisRange> ranges;
  int64_t begin = 0;
  for (int64_t split : rangeSplits(bodies, shape.back())) {
    ranges.push_back({begin, split});
    begin = split;
  }
  ranges.push_back({begin, shape.back()});
  return ranges;
}

} // namespace kiln::codegen
