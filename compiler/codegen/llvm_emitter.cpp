#include "compiler/codegen/llvm_emitter.h"

#include <algorithm>
#include <functional>
#include <map>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/codegen/llvm_access_metadata.h"
#include "compiler/codegen/llvm_library_call.h"
#include "compiler/codegen/llvm_scalar_ops.h"
#include "compiler/codegen/llvm_storage.h"
#include "ir/float16.h"

namespace kiln::codegen {
namespace {

using llvm::Value;

int64_t product(const Shape &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= shape[d];
  return n;
}

// Index bindings while an expression is emitted: Var(d) and RVar(id) values.
struct Env {
  std::vector<Value *> vars;
  std::map<int, Value *> rvars;

  std::vector<Value *> key() const {
    std::vector<Value *> k = vars;
    for (const auto &[id, v] : rvars)
      k.push_back(v);
    return k;
  }
};

std::vector<bool> materializedStages(const KernelProgram &program) {
  std::vector<bool> materialized;
  for (const Stage &stage : program.stages)
    materialized.push_back(stage.materialized);
  return materialized;
}

class Emitter {
public:
  Emitter(const KernelProgram &program, OverflowMode overflow, llvm::Module &module)
      : program_(program), overflow_(overflow), module_(module), ctx_(module.getContext()),
        b_(ctx_), storage_(b_, overflow), scratch_scopes_(ctx_, materializedStages(program)) {}

  Status emit(const std::string &name) {
    llvm::Type *ptr = b_.getPtrTy();
    llvm::Type *i64 = b_.getInt64Ty();
    auto *type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64, ptr}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addParamAttr(0, llvm::Attribute::NoAlias);
    fn_->addParamAttr(1, llvm::Attribute::NoAlias);
    fn_->addParamAttr(4, llvm::Attribute::NoAlias);
    storage_.setFunction(fn_);
    if (program_.library.empty())
      emitRowLoops();
    else
      emitLibraryCall(b_, module_, fn_, program_, overflow_);
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyFunction(*fn_, &os))
      return Error("generated kernel '" + name + "' is not valid LLVM IR: " + os.str());
    return Status::ok();
  }

private:
  // The rows [row_begin, row_end), then the float status published.
  void emitRowLoops() {
    llvm::Type *ptr = b_.getPtrTy();
    llvm::Type *i64 = b_.getInt64Ty();
    llvm::Value *buffers = fn_->getArg(0);
    scratch_ = fn_->getArg(1);
    Value *row_begin = fn_->getArg(2), *row_end = fn_->getArg(3);

    auto *entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    const size_t slots = program_.inputs.size() + program_.outputs.size();
    for (size_t i = 0; i < slots; ++i)
      pointers_.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, buffers, i),
                                        "buf" + std::to_string(i)));
    // One-element inputs (a learning rate, a step) once, before any store:
    // what is computed from them alone then leaves the loops.
    for (const TensorType &t : program_.inputs)
      single_inputs_.push_back(t.numElements() != 1
                                   ? nullptr
                                   : storage_.load(pointers_[single_inputs_.size()], t.dtype));

    auto *rows = llvm::BasicBlock::Create(ctx_, "rows", fn_);
    auto *done = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(row_begin, row_end), rows, done);
    b_.SetInsertPoint(rows);
    auto *row = b_.CreatePHI(i64, 2, "row");
    row->addIncoming(row_begin, entry);
    emitRow(row);
    Value *next = b_.CreateAdd(row, b_.getInt64(1));
    row->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, row_end), rows, done);
    b_.SetInsertPoint(done);
    auto *publish = llvm::BasicBlock::Create(ctx_, "status.publish", fn_);
    auto *ret = llvm::BasicBlock::Create(ctx_, "ret", fn_);
    Value *status = storage_.status();
    b_.CreateCondBr(b_.CreateICmpNE(status, b_.getInt32(0)), publish, ret);
    b_.SetInsertPoint(publish);
    b_.CreateAtomicRMW(llvm::AtomicRMWInst::Or, fn_->getArg(4), status, llvm::MaybeAlign(4),
                       llvm::AtomicOrdering::Monotonic);
    b_.CreateBr(ret);
    b_.SetInsertPoint(ret);
    b_.CreateRetVoid();
  }

  // One row: the materialised stages into scratch, then the stored outputs.
  void emitRow(Value *row) {
    const int p = program_.outer_rank;
    const Shape &first = program_.stages[program_.outputs[0].rowStage()].shape;
    std::vector<Value *> outer(p);
    Value *rest = row;
    for (int d = p - 1; d >= 0; --d) {
      Value *extent = b_.getInt64(first[d]);
      outer[d] = d == 0 ? rest : b_.CreateURem(rest, extent);
      if (d > 0)
        rest = b_.CreateUDiv(rest, extent);
    }
    memo_.clear();
    invariant_memo_.clear();
    // What the row reads at indices of its outer axes alone (a Gather's
    // token id, a loss's label) is loaded once, in a block ahead of its
    // loops: left inside, it is reloaded per element, since a store to an
    // output might alias it, and the table read it indexes becomes a gather.
    row_outer_ = outer;
    auto *invariants = llvm::BasicBlock::Create(ctx_, "row.invariants", fn_);
    auto *body = llvm::BasicBlock::Create(ctx_, "row.body", fn_);
    b_.CreateBr(invariants);
    b_.SetInsertPoint(invariants);
    invariant_point_ = b_.CreateBr(body);
    b_.SetInsertPoint(body);
    for (size_t s = 0; s < program_.stages.size(); ++s) {
      const Stage &stage = program_.stages[s];
      if (!stage.materialized)
        continue;
      const int64_t base = program_.scratchOffset(static_cast<int>(s));
      forEachInRow(stage.shape, outer, [&](const std::vector<Value *> &idx, Value *inner) {
        Value *v = emitExpr(stage.body, Env{idx, {}});
        tagScratch(b_.CreateStore(v, scratchSlot(base, inner, stage.type)), s);
      });
    }
    parallel_loops_ = true; // each element stored once from the inputs' (markParallelLoop)
    emitOutputs(row, outer);
    parallel_loops_ = false;
    invariant_point_ = nullptr;
  }

  // A row of every stored output. Plain outputs of one shape share one loop:
  // what they have in common (AdamW's m and v inside its new parameter,
  // SwiGLU's SiLU inside its product) is computed once per element, each
  // input read once. An element's values are all computed before any is
  // stored. The innermost axis runs as one loop per range of innerRanges,
  // each reading its inputs with affine indices where it can (Concat along
  // the last axis: each range reads its own input alone).
  void emitOutputs(Value *row, const std::vector<Value *> &outer) {
    const int p = program_.outer_rank;
    const size_t n = program_.outputs.size();
    auto row_sum = [&](size_t o) { return program_.outputs[o].row_sum_stage >= 0; };
    std::vector<bool> done(n, false);
    for (size_t o = 0; o < n; ++o) {
      if (done[o])
        continue;
      const StoredOutput &out = program_.outputs[o];
      Value *pointer = pointers_[program_.inputs.size() + o];
      if (row_sum(o)) {
        // The tile's f32 partial sums: each row's summands added in row order.
        const Stage &stage = program_.stages[out.row_sum_stage];
        forEachInRow(stage.shape, outer, [&](const std::vector<Value *> &idx, Value *inner) {
          Value *v = loadStage(program_.stageBuffer(out.row_sum_stage), idx);
          Value *slot = b_.CreateGEP(b_.getFloatTy(), pointer, inner);
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(b_.getFloatTy(), slot), v), slot);
        });
        continue;
      }
      const Stage &stage = program_.stages[out.stage];
      const int64_t inner_size = product(stage.shape, p, stage.shape.size());
      Value *base = b_.CreateMul(row, b_.getInt64(inner_size));
      std::vector<size_t> together{o};
      for (size_t k = o + 1; k < n; ++k)
        if (!done[k] && !row_sum(k) &&
            program_.stages[program_.outputs[k].stage].shape == stage.shape) {
          together.push_back(k);
          done[k] = true;
        }
      const std::vector<AxisRange> ranges = innerRanges(program_, stage.shape);
      forEachInRow(
          stage.shape, outer,
          [&](const std::vector<Value *> &idx, Value *inner) {
            std::vector<Value *> values;
            for (size_t k : together)
              values.push_back(loadStage(program_.stageBuffer(program_.outputs[k].stage), idx));
            for (size_t j = 0; j < together.size(); ++j) {
              const DType dtype = program_.outputs[together[j]].dtype;
              Value *to = pointers_[program_.inputs.size() + together[j]];
              storage_.store(values[j], dtype,
                             storage_.pointer(to, dtype, b_.CreateAdd(base, inner)));
            }
          },
          ranges.size() > 1 ? &ranges : nullptr);
    }
  }

  // Loops over the row part (axes from outer_rank on) of `shape`; `body` gets
  // the full indices and the flat index within the row. With `ranges`, the
  // innermost axis runs as one loop per range, range_ naming it.
  void forEachInRow(const Shape &shape, const std::vector<Value *> &outer,
                    const std::function<void(const std::vector<Value *> &, Value *)> &body,
                    const std::vector<AxisRange> *ranges = nullptr) {
    const size_t p = outer.size();
    if (product(shape, p, shape.size()) == 0)
      return;
    std::vector<Value *> idx(outer);
    idx.resize(shape.size());
    const std::vector<int64_t> st = stridesOf(shape);
    std::function<void(size_t, Value *)> nest = [&](size_t d, Value *flat) {
      if (d == shape.size()) {
        body(idx, flat);
        return;
      }
      if (ranges && d + 1 == shape.size()) {
        for (const AxisRange &r : *ranges) {
          loop(r.end - r.begin, nullptr, [&](Value *i, Value *) {
            idx[d] = b_.CreateAdd(i, b_.getInt64(r.begin), "", true, true);
            range_ = {idx[d], r.begin, r.end};
            nest(d + 1, b_.CreateAdd(flat, b_.CreateMul(idx[d], b_.getInt64(st[d]))));
            return nullptr;
          });
        }
        range_ = {};
        return;
      }
      loop(shape[d], nullptr, [&](Value *i, Value *) {
        idx[d] = i;
        nest(d + 1, b_.CreateAdd(flat, b_.CreateMul(i, b_.getInt64(st[d]))));
        return nullptr;
      });
    };
    nest(p, b_.getInt64(0));
  }

  // A counted loop [0, extent), extent >= 1, as do-while so that everything the
  // body defines dominates the code after it. With `init`, the loop carries a
  // value: body(i, acc) returns the next one, and loop() returns the last.
  Value *loop(int64_t extent, Value *init, const std::function<Value *(Value *, Value *)> &body) {
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    const size_t blocks_before = fn_->size(), loops_before = ++loops_made_;
    auto *header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto *exit = llvm::BasicBlock::Create(ctx_, "loop.exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    auto *i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    i->addIncoming(b_.getInt64(0), pre);
    llvm::PHINode *acc = nullptr;
    if (init) {
      acc = b_.CreatePHI(init->getType(), 2, "acc");
      acc->addIncoming(init, pre);
    }
    Value *result = body(i, acc);
    Value *next = b_.CreateAdd(i, b_.getInt64(1));
    llvm::BasicBlock *latch = b_.GetInsertBlock();
    i->addIncoming(next, latch);
    if (acc)
      acc->addIncoming(result, latch);
    llvm::BranchInst *back =
        b_.CreateCondBr(b_.CreateICmpSLT(next, b_.getInt64(extent)), header, exit);
    if (parallel_loops_ && loops_made_ == loops_before) { // innermost
      std::vector<llvm::BasicBlock *> body;
      size_t index = 0;
      for (llvm::BasicBlock &block : *fn_)
        if (index++ >= blocks_before && &block != exit)
          body.push_back(&block);
      markParallelLoop(body, back);
    }
    b_.SetInsertPoint(exit);
    return result;
  }

  void tagScratch(llvm::Instruction *access, size_t stage) { scratch_scopes_.tag(access, stage); }

  // A stage's row starts at `base` 8-byte slots into scratch; f32 values lie
  // packed from there (a held row is read and written by vector loops),
  // others one to a slot.
  Value *scratchSlot(int64_t base, Value *inner, ScalarType type) {
    if (type == ScalarType::F32)
      return b_.CreateGEP(b_.getFloatTy(),
                          b_.CreateGEP(b_.getInt64Ty(), scratch_, b_.getInt64(base)), inner);
    Value *slot = b_.CreateAdd(b_.getInt64(base), inner);
    return b_.CreateGEP(b_.getInt64Ty(), scratch_, slot);
  }

  llvm::Type *scalarType(ScalarType t) {
    switch (t) {
    case ScalarType::F32:
      return b_.getFloatTy();
    case ScalarType::I64:
      return b_.getInt64Ty();
    case ScalarType::Bool:
      return b_.getInt1Ty();
    }
    return nullptr;
  }

  Value *fconstant(double v) { return f32Constant(b_, v); }

  Value *flatIndex(const Shape &shape, const std::vector<Value *> &idx) {
    const std::vector<int64_t> st = stridesOf(shape);
    Value *flat = b_.getInt64(0);
    for (size_t d = 0; d < shape.size(); ++d)
      flat = b_.CreateAdd(flat, b_.CreateMul(idx[d], b_.getInt64(st[d])));
    return flat;
  }

  Value *loadStage(int buffer, const std::vector<Value *> &idx) {
    if (program_.isInput(buffer)) {
      if (Value *single = single_inputs_[buffer])
        return single;
      const TensorType &t = program_.inputs[buffer];
      return storage_.load(storage_.pointer(pointers_[buffer], t.dtype, flatIndex(t.shape, idx)),
                           t.dtype);
    }
    const int s = buffer - static_cast<int>(program_.inputs.size());
    const Stage &stage = program_.stages[s];
    if (!stage.materialized)
      return emitExpr(stage.body, Env{idx, {}});
    const int p = program_.outer_rank;
    Shape row(stage.shape.begin() + p, stage.shape.end());
    std::vector<Value *> inner(idx.begin() + p, idx.end());
    Value *slot = scratchSlot(program_.scratchOffset(s), flatIndex(row, inner), stage.type);
    llvm::LoadInst *value = b_.CreateLoad(scalarType(stage.type), slot);
    tagScratch(value, s);
    return value;
  }

  Value *emitExpr(const ExprRef &e, const Env &env) {
    auto key = std::make_pair(e.get(), env.key());
    if (auto it = memo_.find(key); it != memo_.end())
      return it->second;
    Value *v = emitUncached(*e, env);
    memo_[key] = v;
    return v;
  }

  Value *emitUncached(const Expr &e, const Env &env) {
    const bool f = !e.operands.empty() && e.operands[0]->type == ScalarType::F32;
    auto operand = [&](size_t i) { return emitExpr(e.operands[i], env); };
    switch (e.kind) {
    case ExprKind::FConst:
      return fconstant(static_cast<float>(e.fvalue));
    case ExprKind::IConst:
      return e.type == ScalarType::Bool ? b_.getInt1(e.ivalue != 0) : b_.getInt64(e.ivalue);
    case ExprKind::Var:
      return env.vars.at(e.var);
    case ExprKind::RVar:
      return env.rvars.at(e.var);
    case ExprKind::Load: {
      if (invariant_point_ && b_.GetInsertPoint() != invariant_point_->getIterator() &&
          rowInvariant(e, env)) {
        // Emitted at the row's invariant block, with a memo of its own: a
        // value memoised inside a loop does not dominate that block.
        llvm::IRBuilderBase::InsertPointGuard guard(b_);
        b_.SetInsertPoint(invariant_point_);
        std::swap(memo_, invariant_memo_);
        Value *v = emitUncached(e, env);
        std::swap(memo_, invariant_memo_);
        return v;
      }
      std::vector<Value *> idx;
      for (size_t i = 0; i < e.operands.size(); ++i)
        idx.push_back(operand(i));
      return loadStage(e.buffer, idx);
    }
    case ExprKind::Unary:
      return emitUnary(b_, e.unary, operand(0), f);
    case ExprKind::Binary:
      if (std::optional<int> d = rangeAxis(env)) {
        const int64_t lo = range_.begin, hi = range_.end;
        if (std::optional<int64_t> k = rangedRem(e, *d, lo, hi))
          return *k == 0 ? operand(0) : b_.CreateSub(operand(0), b_.getInt64(*k));
        if (std::optional<bool> holds = rangedPick(e, *d, lo, hi))
          return b_.getInt1(*holds);
      }
      return emitBinary(b_, e.binary, operand(0), operand(1), f);
    case ExprKind::Select:
      if (std::optional<int> d = rangeAxis(env))
        if (std::optional<bool> pick = rangedPick(*e.operands[0], *d, range_.begin, range_.end))
          return *pick ? operand(1) : operand(2);
      return b_.CreateSelect(operand(0), operand(1), operand(2));
    case ExprKind::Convert:
      return emitConvert(b_, operand(0), e.operands[0]->type, e.type);
    case ExprKind::Round:
      return storage_.roundTo(operand(0), e.dtype);
    case ExprKind::Reduce:
      return emitReduce(e, env);
    }
    return nullptr;
  }

  // Whether `e` has one value over the row: constants, the row's own outer
  // indices (not a stage's inlined indices, which may be computed) and
  // inputs loaded at such indices.
  bool rowInvariant(const Expr &e, const Env &env) const {
    switch (e.kind) {
    case ExprKind::Var:
      return e.var < static_cast<int>(row_outer_.size()) && env.vars.at(e.var) == row_outer_[e.var];
    case ExprKind::RVar:
    case ExprKind::Reduce:
      return false;
    case ExprKind::Load:
      if (!program_.isInput(e.buffer))
        return false;
      break;
    default:
      break;
    }
    return std::all_of(e.operands.begin(), e.operands.end(),
                       [&](const ExprRef &x) { return rowInvariant(*x, env); });
  }

  // The axis of `env` bound to the ranged innermost index, if any.
  std::optional<int> rangeAxis(const Env &env) const {
    if (!range_.index)
      return std::nullopt;
    for (size_t d = 0; d < env.vars.size(); ++d)
      if (env.vars[d] == range_.index)
        return static_cast<int>(d);
    return std::nullopt;
  }

  Value *emitReduce(const Expr &e, const Env &env) {
    const bool f = e.type == ScalarType::F32;
    Value *init = reductionIdentity(b_, e.reduce, f);
    if (e.extent <= 0)
      return init;
    return loop(e.extent, init, [&](Value *i, Value *acc) {
      Env inner = env;
      inner.rvars[e.var] = i;
      return combineReduction(b_, e.reduce, f, acc, emitExpr(e.operands[0], inner));
    });
  }

  const KernelProgram &program_;
  OverflowMode overflow_;
  llvm::Module &module_;
  llvm::LLVMContext &ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function *fn_ = nullptr;
  Value *scratch_ = nullptr;
  KernelStorage storage_;
  ScratchScopes scratch_scopes_;
  std::vector<Value *> pointers_;
  // The index of forEachInRow's ranged innermost loop and the range [begin,
  // end) it runs over, where emitUncached decides wraps and comparisons by
  // it (kernel_expr.h's rangeSplits).
  struct {
    Value *index = nullptr;
    int64_t begin = 0, end = 0;
  } range_;
  std::vector<Value *> single_inputs_; // per input: its one element, loaded on entry
  bool parallel_loops_ = false;        // loops made now are marked parallel (emitOutputs)
  size_t loops_made_ = 0;
  std::map<std::pair<const Expr *, std::vector<Value *>>, Value *> memo_;
  // The row's outer indices and the end of the block ahead of its loops,
  // where row-invariant loads go (emitRow), with their own memo.
  std::vector<Value *> row_outer_;
  llvm::Instruction *invariant_point_ = nullptr;
  std::map<std::pair<const Expr *, std::vector<Value *>>, Value *> invariant_memo_;
};

} // namespace

Status emitKernel(const KernelProgram &program, const std::string &function_name,
                  OverflowMode overflow, llvm::Module &module) {
  if (program.outputs.empty())
    return Error("kernel '" + function_name + "' stores nothing");
  return Emitter(program, overflow, module).emit(function_name);
}

} // namespace kiln::codegen
